"""What the screens about exactly one scenario share (requests, versions, training): the app's chosen scenario,
else the first the daemon has; a title line; loading in a worker thread, again on ctrl+r, on a change of the
app's scenario, on a step or release of the scenario, and once connected while there was no scenario yet."""

from __future__ import annotations

from typing import ClassVar, Generic, TypeVar

from textual.app import ComposeResult
from textual.widgets import Static

from reef_client import Event, ReefClientError
from reef_tui.screens.reef_screen import ReefScreen

Loaded = TypeVar("Loaded")


class ScenarioScreen(ReefScreen, Generic[Loaded]):
    """The title `#NAME-title` over compose_scenario; fetch (in a worker of group NAME) then show_loaded."""

    NAME: ClassVar[str]
    """The title's id is NAME-title; the loading worker's group is NAME."""

    def __init__(self) -> None:
        super().__init__()
        self.scenario: str | None = None

    def compose_body(self) -> ComposeResult:
        yield Static(id=f"{self.NAME}-title", classes="screen-title")
        yield from self.compose_scenario()

    def compose_scenario(self) -> ComposeResult:
        """The widgets under the title."""
        raise NotImplementedError

    def _on_event(self, event: Event) -> None:
        if event.scenario == self.scenario and event.type in ("step", "release"):
            self.reload()

    def _on_connection(self, connected: bool | None) -> None:
        if connected and self.scenario is None:
            self.reload()

    def action_reload(self) -> None:
        self.reload()

    def reload(self) -> None:
        self.scenario = self.reef.scenario_or_first()
        title = self.query_one(f"#{self.NAME}-title", Static)
        if self.scenario is None:
            title.update("no scenario yet")
            self.say_no_scenario()
            return
        heading = self.heading(self.scenario)
        if heading is not None:
            title.update(heading)
        self.run_worker(self._load, thread=True, group=self.NAME, exclusive=True)

    def _load(self) -> None:
        scenario = self.scenario
        if scenario is None:
            return
        try:
            loaded = self.fetch(scenario)
        except ReefClientError as exc:
            self.app.call_from_thread(self.show_error, exc.message)
            return
        self.app.call_from_thread(self.show_loaded, scenario, loaded)

    def heading(self, scenario: str) -> str | None:
        """The title once there is a scenario; None leaves it to show_loaded."""
        return None

    def say_no_scenario(self) -> None:
        """Besides the title: there is no scenario yet."""

    def fetch(self, scenario: str) -> Loaded:
        """What the screen shows of `scenario`, from the daemon; runs in a worker thread."""
        raise NotImplementedError

    def show_loaded(self, scenario: str, loaded: Loaded) -> None:
        """Show what fetch returned."""
        raise NotImplementedError

    def show_error(self, message: str) -> None:
        """Show why fetch failed."""
        raise NotImplementedError
