"""Bindings several screens share: help first (so the footer shows it even at 80 columns) and the score keys."""

from __future__ import annotations

from textual.binding import Binding

from reef_tui.scoring import KEY_FRACTIONS, KEY_LABELS

HELP = Binding("question_mark", "app.help", "Help", key_display="?")
SCORE_ACTION = "score"


def score_bindings() -> list[Binding]:
    """One binding per scoring key (the footer shows them once, as `1-5 Score`; the palette lists each with the
    score it sends)."""
    shown = Binding("1", f"{SCORE_ACTION}('1')", "Score", key_display="1-5")
    hidden = [
        Binding(key, f"{SCORE_ACTION}('{key}')", "Score", key_display=KEY_LABELS.get(key), show=False)
        for key in KEY_FRACTIONS
        if key != "1"
    ]
    return [shown, *hidden]


def score_key(action: str) -> str | None:
    """The key of a score action (`score('4')` → `4`); None for any other action."""
    prefix = f"{SCORE_ACTION}('"
    return action[len(prefix) : -2] if action.startswith(prefix) and action.endswith("')") else None
