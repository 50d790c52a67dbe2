"""The pieces of the help page (`?` / F1) in markdown: a table of a screen's keys, read from its bindings, and the
table of what each score key sends. Each screen says which sections it contributes (`ReefScreen.help_sections`)."""

from __future__ import annotations

from collections.abc import Iterable

from textual.binding import Binding, BindingType

from reef_contract import ScoreScale
from reef_tui.bindings import score_key
from reef_tui.scoring import score_table


def keys_section(title: str, bindings: Iterable[BindingType]) -> str:
    """A `## title` table of the described keys; the help key itself and the score keys are left out (the score
    keys have a table of their own)."""
    lines = [f"## {title}", "", "| key | does |", "|---|---|"]
    for binding in bindings:
        if isinstance(binding, Binding) and binding.description and binding.key != "question_mark" \
                and score_key(binding.action) is None:  # fmt: skip
            lines.append(f"| `{binding.key_display or binding.key}` | {binding.description} |")
    return "\n".join(lines)


def scores_section(scale: ScoreScale) -> str:
    """What each score key sends on the daemon's `scale`."""
    scores = ["## Scores", "",
              f"The daemon scores from {scale['min']:g} (worst) to {scale['max']:g} (best). A score key sends a report",
              "with this score for the record under the cursor, then moves to the next unscored record;",
              "the toast names the record scored. `f` sends feedback text instead.", "",
              "| key | score sent |", "|---|---|"]  # fmt: skip
    scores += [
        f"| `{key}` | {score:g}{f' ({meaning})' if meaning else ''} |" for key, score, meaning in score_table(scale)
    ]
    return "\n".join(scores)
