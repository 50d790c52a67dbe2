"""The reef app: four modes (records, requests, versions, training) over one daemon connection.

The app owns the client, the daemon's status, the chosen scenario and the live event stream; screens read them
and subscribe to `daemon_events`. Work that waits on the daemon runs in thread workers.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Any, ClassVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.command import CommandPalette
from textual.reactive import reactive, var
from textual.screen import ModalScreen, Screen
from textual.signal import Signal

from reef_client import Event, ReefClient, ReefClientError, Status
from reef_contract import ScoreScale
from reef_tui.bindings import score_key
from reef_tui.live import DaemonConnected, DaemonEvent, DaemonGone, EventFollower
from reef_tui.scoring import KEY_LABELS, key_meaning, key_score, scale_of
from reef_tui.screens.help import HelpScreen
from reef_tui.screens.records import RecordsScreen
from reef_tui.screens.requests import RequestsScreen
from reef_tui.screens.training import TrainingScreen
from reef_tui.screens.versions import VersionsScreen

DARK, LIGHT = "textual-dark", "textual-light"


STATUS_EVENTS = frozenset({"scenario", "step", "release"})  # the events after which the status is read again
DIALOG_ACTIONS = frozenset({"quit", "focus_next", "focus_previous"})  # the app's actions a dialog leaves on


class ReefApp(App[None]):
    """Watch, score and steer one reef daemon."""

    CSS_PATH = "reef.tcss"
    TITLE = "reef"
    MODES: ClassVar[dict[str, Any]] = {
        "records": RecordsScreen,
        "requests": RequestsScreen,
        "versions": VersionsScreen,
        "training": TrainingScreen,
    }
    DEFAULT_MODE = "records"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("f1,question_mark", "help", "Help", key_display="? / F1", show=False),
        Binding("r", "switch_mode('records')", "Records", show=False),
        Binding("e", "switch_mode('requests')", "Requests", show=False),
        Binding("v", "switch_mode('versions')", "Versions", show=False),
        Binding("t", "switch_mode('training')", "Training", show=False),
        Binding("s", "next_scenario", "Scenario"),
        Binding("ctrl+t", "toggle_theme", "Theme", show=False),
    ]

    connected: reactive[bool | None] = reactive(None)
    # The daemon's last status (None until it first answers); the daemon bar follows it (a step's weights).
    daemon_status: var[Status | None] = var(None)
    """None until the daemon first answers, then whether it answers now."""
    scenario: reactive[str | None] = reactive(None)
    """The scenario the screens show; None means every scenario (records) or the first one (the others)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        scenario: str | None = None,
        client: ReefClient | None = None,
        follow: bool = True,
    ) -> None:
        """`client` replaces the HTTP client (tests pass one with fixed answers); `follow=False` reads the status
        once and does not watch the event stream."""
        super().__init__()
        self.url = url.rstrip("/")
        self.token = token
        self.client = client or ReefClient(self.url, token)
        self.gone_reason = ""
        self.daemon_events: Signal[Event] = Signal(self, "daemon-events")
        self.set_reactive(ReefApp.scenario, scenario)
        self._follower = EventFollower(self.url, token, self) if follow else None

    def on_mount(self) -> None:
        self.theme = DARK
        if self._follower is not None:
            self._follower.start()
        else:
            self.run_worker(self._read_status_once, thread=True)

    def on_unmount(self) -> None:
        if self._follower is not None:
            self._follower.stop()
        self.client.close()

    def _read_status_once(self) -> None:
        try:
            self.post_message(DaemonConnected(self.client.status()))
        except ReefClientError as exc:
            self.post_message(DaemonGone(exc.message))

    # --- the daemon -----------------------------------------------------------------------------------------

    def on_daemon_connected(self, message: DaemonConnected) -> None:
        self.daemon_status = message.status
        if self.connected is False:
            self.notify("the daemon is back; live again", title="reconnected")
        self.connected = True

    def on_daemon_gone(self, message: DaemonGone) -> None:
        self.gone_reason = message.reason
        if self.connected is not False:
            self.notify(f"{message.reason}; retrying", title="daemon gone", severity="warning")
        self.connected = False

    def on_daemon_event(self, message: DaemonEvent) -> None:
        # A scenario was created, changed or archived (`s` cycles what is now), or a step or release moved the
        # weights the runtime serves (the daemon bar shows their version): read the status again.
        if message.event.type in STATUS_EVENTS:
            self.run_worker(self._read_status, thread=True, group="status", exclusive=True)
        self.daemon_events.publish(message.event)

    def _read_status(self) -> None:
        try:
            status = self.client.status()
        except ReefClientError:
            return  # the event stream notices a daemon that is gone
        self.call_from_thread(self._keep_status, status)

    def _keep_status(self, status: Status) -> None:
        self.daemon_status = status

    @property
    def score_scale(self) -> ScoreScale:
        """The daemon's score scale (0 to 1 until it says otherwise)."""
        return scale_of(self.daemon_status)

    @property
    def scenario_names(self) -> list[str]:
        """The daemon's active scenarios, sorted."""
        return sorted(self.daemon_status.get("scenarios") or {}) if self.daemon_status else []

    def scenario_or_first(self) -> str | None:
        """The chosen scenario, else the first the daemon has (screens that need exactly one use this)."""
        names = self.scenario_names
        return self.scenario or (names[0] if names else None)

    # --- actions --------------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Letters typed in a dialog belong to the dialog, not to the app's navigation; the palette offers them all.
        # Tab and shift+Tab are the app's focus actions, and a dialog needs them to move between its fields.
        in_dialog = isinstance(self.screen, ModalScreen) and not isinstance(self.screen, CommandPalette)
        return not (in_dialog and action not in DIALOG_ACTIONS)

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_toggle_theme(self) -> None:
        self.theme = LIGHT if self.theme == DARK else DARK

    def action_next_scenario(self) -> None:
        """Cycle: every scenario, then each one by name."""
        choices: list[str | None] = [None, *self.scenario_names]
        position = choices.index(self.scenario) if self.scenario in choices else 0
        self.scenario = choices[(position + 1) % len(choices)]
        self.notify(f"scenario: {self.scenario or 'all'}", timeout=2)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The palette offers every binding of the app and the current screen (each score key with the score it
        sends), each once and under the key that runs it here, plus Textual's own commands."""
        seen: set[str] = set()
        # reef's own keys first: Textual's ctrl+q also quits, but the help and the footer say q.
        textual_keys = {binding.key for binding in App.BINDINGS if isinstance(binding, Binding)}
        for active in sorted(screen.active_bindings.values(), key=lambda active: active.binding.key in textual_keys):
            binding = active.binding
            title = binding.description
            key = score_key(binding.action)
            if key is not None:
                meaning = key_meaning(key)
                title = f"Score {key_score(key, self.score_scale):g}" + (f" ({meaning})" if meaning else "")
            if title and title not in seen and binding.action != "command_palette":
                seen.add(title)
                shown_key = KEY_LABELS.get(key, key) if key is not None else binding.key_display or binding.key
                yield SystemCommand(title, f"key {shown_key}", partial(self.run_action, binding.action, active.node))
        # Textual's own, but not those the bindings above already offer (Theme, Quit) under their keys here.
        yield from (command for command in super().get_system_commands(screen) if command.title not in seen)
