"""Help (`?` / F1): every key of every screen, read from the app's bindings and its modes' own account of their
keys, and what each score key sends."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from reef_tui.help_sections import keys_section
from reef_tui.screens.reef_screen import ReefScreen

if TYPE_CHECKING:
    from reef_tui.app import ReefApp

INTRO = """\
# reef

Records arrive live from the daemon (`GET /reef/events`); nothing polls. When the daemon goes away the bar under
the header says so, the screens keep what they show, and the app reconnects by itself, replaying what it missed.
Everything here is also in the command palette (**ctrl+p**).
"""


def help_text(app: ReefApp) -> str:
    """The help page as markdown: the app's own keys, then what each of its modes (and the screens it opens)
    says of itself, in the order of the modes."""
    sections = [INTRO, keys_section("Everywhere", app.BINDINGS)]
    for mode in app.MODES.values():
        if isinstance(mode, type) and issubclass(mode, ReefScreen):
            sections += mode.help_sections(app.score_scale)
    return "\n\n".join(sections)


class HelpScreen(ModalScreen[None]):
    """A scrollable page of keys; escape or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,f1,question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Markdown(help_text(cast("ReefApp", self.app)))
