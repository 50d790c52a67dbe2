"""A scenario's versions, newest first: result, current, pending and canary flags, the live score of the sessions
each served (mean and trend), the request that led to each; the running canary above them (its live score beside
the served version's), following the daemon's canary events; the evaluation gate's evidence above the files changed
against the parent; promote, roll back and install, each behind a confirmation; start a canary of a version (the
share asked in a box) and end the running one (behind a confirmation)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import ActiveBinding, Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from reef_client import Event, ReefClientError, ShownRelease, VersionScores, mark_installed
from reef_client.render import formats
from reef_client.render.live_scores import canary_mark
from reef_contract import CANARY_EVENT
from reef_tui.bindings import HELP
from reef_tui.diffing import files_diff
from reef_tui.screens.canary import CanaryScreen
from reef_tui.screens.confirm import ConfirmScreen
from reef_tui.screens.install import InstallScreen
from reef_tui.screens.scenario_screen import ScenarioScreen
from reef_tui.version_scores import canary_line, live_cell, live_summary
from reef_tui.widgets.evidence_table import evidence_view

COLUMNS = ("version", "operation", "result", "state", "when", "live score", "request")
CANARY_KEYS = ("c", "x")
HARNESS_ACTIONS = frozenset({"diff", "install", "canary", "end_canary"})
"""What only a harness's versions take: their files diffed, installed on this machine, tried on a share of sessions."""
RELEASE_ACTIONS = frozenset({"promote", "rollback"})
"""What every recipe with releases (a harness's or weights') takes; the record recipe makes none."""
FOOTER_ROOM_FOR_CANARY = 100
"""Columns the footer needs to show the canary keys and still `q Quit` and `s Scenario`; on a narrower terminal
the footer leaves them out (help and the palette list them at any width)."""


def state_of(release: ShownRelease) -> str:
    """current / pending / promoted as vN / restorable, as the daemon flags them, and installed on this machine."""
    if release.get("current"):
        state = "current"
    elif release.get("pending"):
        state = "pending"
    elif release.get("promoted_as"):
        state = f"promoted as {release['promoted_as']}"
    else:
        state = "restorable" if release.get("restorable") else ""
    if release.get("installed"):
        state = f"{state}, installed" if state else "installed"
    return state


def metric_lines(metrics: dict[str, Any], versions: dict[str, str]) -> list[str]:
    """A step's metrics as lines a person reads (`target: v1 (release 3f2a9c0d)`, `mean reward: 0.42`), not JSON;
    `versions` names a release id's version."""
    lines = []
    for key, value in metrics.items():
        if key == "target_release_id" and isinstance(value, str):
            version = versions.get(value)
            lines.append(f"target: {version} (release {value[:8]})" if version else f"target: release {value[:8]}")
        else:
            lines.append(f"{key.replace('_', ' ')}: {_readable(value)}")
    return lines


def _readable(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return {True: "yes", False: "no", None: formats.MISSING}[value]
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{key.replace('_', ' ')} {_readable(item)}" for key, item in value.items()) or "none"
    if isinstance(value, list):
        return ", ".join(_readable(item) for item in value) or "none"
    return str(value)


def request_text(release: ShownRelease) -> str:
    """The text of the change request a release answered; empty when none did."""
    request = release.get("request")
    return (request["text"] or "") if request else ""


class VersionsScreen(ScenarioScreen[list[ShownRelease]]):
    """Releases over the selected one's diff or metrics."""

    SUB_TITLE = "versions"
    HELP_TITLE = "Versions"
    NAME = "versions"
    BINDINGS: ClassVar[list[BindingType]] = [
        HELP,
        Binding("d", "diff", "Diff"),
        Binding("p", "promote", "Promote"),
        Binding("b", "rollback", "Roll back"),
        Binding("i", "install", "Install"),
        Binding("c", "canary", "Canary"),
        Binding("x", "end_canary", "End canary"),
        Binding("ctrl+r", "reload", "Reload", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.releases: dict[str, ShownRelease] = {}
        self.live: VersionScores | None = None

    def compose_scenario(self) -> ComposeResult:
        yield Static(id="version-canary")
        table: DataTable[str] = DataTable(id="versions-table", cursor_type="row")
        table.add_columns(*COLUMNS)
        yield table
        with VerticalScroll(id="version-scroll"):
            yield Static(id="version-evidence")
            yield Static(id="version-view")

    def _on_event(self, event: Event) -> None:
        super()._on_event(event)
        if event.scenario == self.scenario and event.type == CANARY_EVENT:  # started, ended or rolled back
            self.reload()

    def _recipe_takes(self, action: str) -> bool:
        """Whether the daemon's recipe has versions that take `action` (all of them until its status is known)."""
        status = self.reef.daemon_status
        if status is None:
            return True
        recipe = status["recipe"]
        if action in HARNESS_ACTIONS:
            return bool(recipe.get("harness"))
        if action in RELEASE_ACTIONS:
            return bool(recipe.get("harness") or recipe.get("trains"))
        return True

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The footer and the palette offer only what the recipe's versions take: no Diff under the record recipe.
        return self._recipe_takes(action)

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        active = super().active_bindings
        if self.app.size.width >= FOOTER_ROOM_FOR_CANARY:
            return active
        return {
            key: shown._replace(binding=replace(shown.binding, show=False)) if key in CANARY_KEYS else shown
            for key, shown in active.items()
        }

    def on_resize(self) -> None:
        self.refresh_bindings()  # the footer shows the canary keys only where they fit

    def _view(self, renderable: Any) -> None:
        self.query_one("#version-view", Static).update(renderable)

    # --- loading --------------------------------------------------------------------------------------------

    def heading(self, scenario: str) -> str:
        self.refresh_bindings()  # the recipe decides which keys the footer offers
        return f"versions of [b]{scenario}[/b]"

    def say_no_scenario(self) -> None:
        self._view(Text("versions appear once a scenario exists; s picks a scenario", style="dim"))

    def fetch(self, scenario: str) -> list[ShownRelease]:
        releases = mark_installed(scenario, self.reef.client.releases(scenario))
        try:
            live = self.reef.client.version_scores(scenario)
        except ReefClientError:
            live = None  # a daemon that keeps no live scores: the versions alone
        self.app.call_from_thread(setattr, self, "live", live)  # before show_loaded, which reads it
        return releases

    def show_error(self, message: str) -> None:
        self._view(Text(message, style="red"))

    def show_loaded(self, scenario: str, releases: list[ShownRelease]) -> None:
        table: DataTable[str] = self.query_one(DataTable)
        selected = self._selected()
        table.clear()
        self.releases = {}
        for release in releases:
            key = f"step {release.get('step')}"  # skipped and rejected steps have no version: the step is the key
            self.releases[key] = release
            table.add_row(
                str(release.get("version") or formats.MISSING),
                str(release.get("operation")),
                str(release.get("result")),
                self._state(release),
                formats.clock(release.get("created_at")),
                live_cell(self.live, release["release_id"]),
                request_text(release),
                key=key,
            )
        if selected is not None:
            keys = list(self.releases)
            chosen = f"step {selected.get('step')}"
            if chosen in keys:
                table.move_cursor(row=keys.index(chosen))
        if not releases:
            self._view(Text("no versions yet", style="dim"))
        self._show_canary()

    def _show_canary(self) -> None:
        versions = {str(r["release_id"]): str(r.get("version")) for r in self.releases.values() if r["release_id"]}
        line = canary_line(self.live, versions)
        banner = self.query_one("#version-canary", Static)
        banner.display = bool(line)
        banner.update(f"{line} · x ends it" if line else "")

    def _selected(self) -> ShownRelease | None:
        table: DataTable[str] = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return self.releases.get(str(key.value))

    def on_data_table_row_highlighted(self, message: DataTable.RowHighlighted) -> None:
        release = self.releases.get(str(message.row_key.value))
        if release is not None:
            self._show_evidence(release)
            self._view(self._summary(release))

    def _show_evidence(self, release: ShownRelease) -> None:
        shown = evidence_view(release.get("metrics") or {})
        panel = self.query_one("#version-evidence", Static)
        panel.display = shown is not None
        panel.update(shown if shown is not None else "")

    def _state(self, release: ShownRelease) -> str:
        canary = canary_mark(release["release_id"], self.live["canary"] if self.live else None)
        return ", ".join(mark for mark in (state_of(release), canary) if mark)

    def _summary(self, release: ShownRelease) -> Any:
        made = f"{release.get('version') or formats.MISSING}  {release.get('operation')}  {release.get('result')}"
        lines = [f"{made}  {self._state(release)}"]
        if request_text(release):
            lines.append(f"asked: {request_text(release)}")
        live = live_summary(self.live, release["release_id"])
        if live:
            lines.append(live)
        metrics = {key: value for key, value in (release.get("metrics") or {}).items() if key != "evidence"}
        versions = {str(r["release_id"]): str(r["version"]) for r in self.releases.values() if r.get("version")}
        lines += metric_lines(metrics, versions)
        if self._recipe_takes("diff"):
            lines.append("d shows the files changed against its parent")
        return Text("\n".join(lines))

    # --- diff -----------------------------------------------------------------------------------------------

    def action_diff(self) -> None:
        release = self._selected()
        if release is None or self.scenario is None:
            return
        scenario = self.scenario
        self._view(Text(f"diffing {release.get('version')} against its parent …", style="dim"))
        self.run_worker(lambda: self._diff(scenario, release), thread=True, group="diff", exclusive=True)

    def _diff(self, scenario: str, release: ShownRelease) -> None:
        release_id = release["release_id"]
        if not release_id:
            self.app.call_from_thread(self._view, Text("this step published no release: nothing to diff"))
            return
        try:
            child = self.reef.client.harness(scenario, release_id)
            parent_id = release.get("parent_release_id") or child.get("parent_release_id")
            parent = self.reef.client.harness(scenario, parent_id)["files"] if parent_id else {}
        except ReefClientError as exc:
            self.app.call_from_thread(self._view, Text(exc.message, style="red"))
            return
        diff = files_diff(parent, child["files"])
        shown: Any = Syntax(diff, "diff", word_wrap=True) if diff else Text("no files changed against the parent")
        self.app.call_from_thread(self._view, shown)

    # --- promote, roll back, install ------------------------------------------------------------------------

    def action_promote(self) -> None:
        self._change("promote", "Promote {v} of {s}: it becomes what the scenario serves.")

    def action_rollback(self) -> None:
        self._change("rollback", "Roll {s} back to {v}: a new version with its files becomes current.")

    def _change(self, operation: str, question: str) -> None:
        release, scenario = self._selected(), self.scenario
        if release is None or scenario is None or not release.get("release_id"):
            self.notify("choose a version that has a release", severity="warning")
            return
        version, release_id = str(release.get("version") or f"step {release.get('step')}"), str(release["release_id"])

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.run_worker(lambda: self._apply(scenario, operation, release_id), thread=True, group="change")

        text = question.format(v=version, s=scenario)
        self.app.push_screen(ConfirmScreen(text, "promote" if operation == "promote" else "roll back"), confirmed)

    def _apply(self, scenario: str, operation: str, release_id: str) -> None:
        try:
            head = self.reef.client.change_release(scenario, operation, release_id)
        except ReefClientError as exc:
            self.app.call_from_thread(self.notify, exc.message, title=f"{operation} refused", severity="error")
            return
        self.app.call_from_thread(self.notify, f"{operation}: {head.get('version')} is the new head", timeout=3)
        self.app.call_from_thread(self.reload)

    def action_install(self) -> None:
        release, scenario = self._selected(), self.scenario
        if release is None or scenario is None or not release.get("release_id"):
            self.notify("choose a version that has a release", severity="warning")
            return
        dialog = InstallScreen(scenario, str(release["release_id"]), str(release.get("version")))
        self.app.push_screen(dialog, lambda _closed: self.reload())  # the list then marks what is installed

    # --- canaries -------------------------------------------------------------------------------------------

    def action_canary(self) -> None:
        release, scenario = self._selected(), self.scenario
        if release is None or scenario is None:
            return
        version = release.get("version")
        if not release.get("release_id"):
            self.notify("this step published no release: choose a version that did", severity="warning")
            return
        if release.get("current"):
            self.notify(f"{version} is the served version; a canary tries another", severity="warning")
            return
        release_id, running = str(release["release_id"]), self.live["canary"] if self.live else None

        def chosen(share: int | None) -> None:
            if share is not None:
                self.run_worker(lambda: self._start_canary(scenario, release_id, share), thread=True, group="change")

        replaces = running["version"] if running and running["release_id"] != release_id else None
        self.app.push_screen(CanaryScreen(scenario, str(version), replaces), chosen)

    def _start_canary(self, scenario: str, release_id: str, share: int) -> None:
        try:
            state = self.reef.client.start_canary(scenario, release_id, share)
        except ReefClientError as exc:
            self.app.call_from_thread(self.notify, exc.message, title="canary refused", severity="error")
            return
        said = f"{state['version']} serves {state['share']:g}% of new sessions beside the served version"
        self.app.call_from_thread(self.notify, said, title="canary started", timeout=3)
        self.app.call_from_thread(self.reload)

    def action_end_canary(self) -> None:
        running, scenario = self.live["canary"] if self.live else None, self.scenario
        if running is None or scenario is None:
            self.notify(f"no canary runs in {scenario or 'this scenario'}", severity="warning")
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.run_worker(lambda: self._end_canary(scenario), thread=True, group="change")

        question = f"End the canary of {running['version']} in {scenario}: every new session runs the served version."
        self.app.push_screen(ConfirmScreen(question, "end canary"), confirmed)

    def _end_canary(self, scenario: str) -> None:
        try:
            ended = self.reef.client.end_canary(scenario)["ended"]
        except ReefClientError as exc:
            self.app.call_from_thread(self.notify, exc.message, title="could not end the canary", severity="error")
            return
        said = f"ended the canary of {ended['version']}" if ended else "no canary ran any more"
        self.app.call_from_thread(self.notify, said, timeout=3)
        self.app.call_from_thread(self.reload)
