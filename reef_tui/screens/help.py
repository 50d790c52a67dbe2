"""Help (`?` / F1): every key of every screen, read from the bindings themselves, and what each score key sends."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, cast

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from reef_daemon.contract import ScoreScale
from reef_tui.bindings import score_key
from reef_tui.scoring import score_table

if TYPE_CHECKING:
    from reef_tui.app import ReefApp

INTRO = """\
# reef

Records arrive live from the daemon (`GET /reef/events`); nothing polls. When the daemon goes away the bar under
the header says so, the screens keep what they show, and the app reconnects by itself, replaying what it missed.
Everything here is also in the command palette (**ctrl+p**).
"""

RECORDS_NOTE = """\
Each row shows what was asked and the start of the answer; receipts are shortened (`c` copies the whole one).
On a tall terminal a pane under the list shows the selected exchange. With follow on, the cursor moves to each
new record only while it is on the newest; put it anywhere else and it stays there. `x` exports the list's
scenario to a JSON lines file (openai, preference or tokens), as `reef export` does, while the list stays live."""


def _keys(title: str, bindings: list[Any]) -> str:
    lines = [f"## {title}", "", "| key | does |", "|---|---|"]
    for binding in bindings:
        # The score keys have a table of their own.
        if isinstance(binding, Binding) and binding.description and binding.key != "question_mark" \
                and score_key(binding.action) is None:  # fmt: skip
            lines.append(f"| `{binding.key_display or binding.key}` | {binding.description} |")
    return "\n".join(lines)


def help_text(scale: ScoreScale) -> str:
    """The help page as markdown, with what each score key sends on the daemon's `scale`."""
    from reef_tui.app import ReefApp  # the app imports this screen
    from reef_tui.screens.record_detail import RecordDetailScreen
    from reef_tui.screens.records import RecordsScreen
    from reef_tui.screens.requests import RequestsScreen
    from reef_tui.screens.training import TrainingScreen
    from reef_tui.screens.versions import VersionsScreen
    from reef_tui.widgets.record_list import RecordList

    scores = ["## Scores", "",
              f"The daemon scores from {scale['min']:g} (worst) to {scale['max']:g} (best). A score key sends a report",
              "with this score for the record under the cursor, then moves to the next unscored record;",
              "the toast names the record scored. `f` sends feedback text instead.", "",
              "| key | score sent |", "|---|---|"]  # fmt: skip
    scores += [
        f"| `{key}` | {score:g}{f' ({meaning})' if meaning else ''} |" for key, score, meaning in score_table(scale)
    ]
    sections = [
        INTRO,
        _keys("Everywhere", ReefApp.BINDINGS),
        _keys("Records", [*RecordsScreen.BINDINGS, *RecordList.BINDINGS]) + "\n\n" + RECORDS_NOTE,
        "\n".join(scores),
        _keys("Record detail", RecordDetailScreen.BINDINGS),
        _keys("Requests", RequestsScreen.BINDINGS),
        _keys("Versions", VersionsScreen.BINDINGS),
        _keys("Training", TrainingScreen.BINDINGS),
    ]
    return "\n\n".join(sections)


class HelpScreen(ModalScreen[None]):
    """A scrollable page of keys; escape or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,f1,question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Markdown(help_text(cast("ReefApp", self.app).score_scale))
