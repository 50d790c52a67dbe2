"""What every full screen of the app shares: the header, the daemon bar and the footer around its own widgets, the
app as a ReefApp, the daemon's live events, (unless it opts out) following the app's scenario and connection, and
what the help page says of it."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Header

from reef_client import Event
from reef_contract import ScoreScale
from reef_tui.help_sections import keys_section
from reef_tui.widgets.daemon_bar import DaemonBar

if TYPE_CHECKING:
    from reef_tui.app import ReefApp


class ReefScreen(Screen[None]):
    """A full screen: compose_body between the daemon bar and the footer; reload on mount and, when FOLLOWS_APP,
    whenever the app's scenario changes."""

    FOLLOWS_APP: ClassVar[bool] = True
    """Watch the app's scenario (reload) and connection (_on_connection)."""
    HELP_TITLE: ClassVar[str] = ""
    """The heading of the screen's keys on the help page."""

    @classmethod
    def help_sections(cls, scale: ScoreScale) -> list[str]:
        """What the help page says of this screen, in markdown: its keys under HELP_TITLE (a screen that opens
        others, or scores on `scale`, adds their sections after its own)."""
        return [keys_section(cls.HELP_TITLE, cls.BINDINGS)]

    @property
    def reef(self) -> ReefApp:
        return cast("ReefApp", self.app)

    def compose(self) -> ComposeResult:
        yield Header()
        yield DaemonBar(id="daemon-bar")
        yield from self.compose_body()
        yield Footer(compact=True)

    def compose_body(self) -> ComposeResult:
        """The screen's own widgets, between the daemon bar and the footer."""
        raise NotImplementedError

    def on_mount(self) -> None:
        self.reef.daemon_events.subscribe(self, self._on_event)
        if self.FOLLOWS_APP:
            self.watch(self.reef, "scenario", lambda _: self.reload(), init=False)
            self.watch(self.reef, "connected", self._on_connection, init=False)
        self.reload()

    def reload(self) -> None:
        """Load what the screen shows."""
        raise NotImplementedError

    def _on_event(self, event: Event) -> None:
        """One event from the daemon's live stream."""

    def _on_connection(self, connected: bool | None) -> None:
        """The app reached the daemon (True) or lost it."""
