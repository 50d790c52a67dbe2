"""Training of a weight scenario: reward and loss per step as sparklines, the current weight version, how many
units were waiting or judged ineligible and why."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, cast

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from reef_cli.client import Event, ReefClientError
from reef_cli.render import formats
from reef_tui.bindings import HELP
from reef_tui.widgets.daemon_bar import DaemonBar
from reef_tui.widgets.metric_line import MetricLine

if TYPE_CHECKING:
    from reef_tui.app import ReefApp

METRICS = (("reward", "mean_reward"), ("loss", "loss"), ("critic loss", "critic_loss"))


def metric_series(releases: list[dict[str, Any]], name: str) -> list[float]:
    """`name` from each training step's metrics, oldest step first (releases arrive newest first)."""
    series = []
    for release in reversed(releases):
        value = (release.get("metrics") or {}).get(name)
        if release.get("operation") == "training" and isinstance(value, int | float) and not isinstance(value, bool):
            series.append(float(value))
    return series


def facts_table(status: dict[str, Any], scenario: str) -> Table:
    """Steps, last step, weight version, waiting units, errors and ineligible counts by reason."""
    training = ((status.get("training") or {}).get("scenarios") or {}).get(scenario) or {}
    runtime = status.get("runtime") or {}
    last = training.get("last_step") or {}
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("steps", str(training.get("steps", 0)))
    if last:
        when = formats.timestamp(last.get("created_at"))
        grid.add_row("last step", f"v{last.get('step')} {last.get('result')} at {when}")
    weights = (last.get("metrics") or {}).get("weight_version", runtime.get("weight_version"))
    grid.add_row("weights", str(weights if weights is not None else formats.MISSING))
    grid.add_row("waiting", str(training.get("waiting_units", 0)))
    if training.get("error"):
        grid.add_row("error", Text(str(training["error"]), style="red"))
    ineligible = training.get("ineligible") or {}
    grid.add_row("ineligible", str(sum(ineligible.values())) if ineligible else "0")
    for reason, count in sorted(ineligible.items(), key=lambda item: -item[1]):
        grid.add_row("", f"{count}: {reason}")
    return grid


class TrainingScreen(Screen[None]):
    """Live with every committed step of the scenario."""

    SUB_TITLE = "training"
    BINDINGS: ClassVar[list[BindingType]] = [HELP, Binding("ctrl+r", "reload", "Reload")]

    def __init__(self) -> None:
        super().__init__()
        self.scenario: str | None = None

    @property
    def reef(self) -> ReefApp:
        return cast("ReefApp", self.app)

    def compose(self) -> ComposeResult:
        yield Header()
        yield DaemonBar(id="daemon-bar")
        yield Static(id="training-title", classes="screen-title")
        with VerticalScroll(id="training-body"):
            for title, _name in METRICS:
                yield MetricLine(title)
            yield Static(id="training-facts")
        yield Footer()

    def on_mount(self) -> None:
        self.reef.daemon_events.subscribe(self, self._on_event)
        self.watch(self.reef, "scenario", lambda _: self.action_reload(), init=False)
        self.watch(self.reef, "connected", self._on_connection, init=False)
        self.action_reload()

    def _on_connection(self, connected: bool | None) -> None:
        if connected and self.scenario is None:
            self.action_reload()

    def _on_event(self, event: Event) -> None:
        if event.scenario == self.scenario and event.type in ("step", "release"):
            self.action_reload()

    def action_reload(self) -> None:
        self.scenario = self.reef.scenario_or_first()
        if self.scenario is None:
            self.query_one("#training-title", Static).update("no scenario yet")
            return
        self.run_worker(self._load, thread=True, group="training", exclusive=True)

    def _load(self) -> None:
        scenario = self.scenario
        if scenario is None:
            return
        try:
            status = self.reef.client.status()
            releases = self.reef.client.releases(scenario)
        except ReefClientError as exc:
            self.app.call_from_thread(self.query_one("#training-facts", Static).update, Text(exc.message, style="red"))
            return
        self.app.call_from_thread(self._show, scenario, status, releases)

    def _show(self, scenario: str, status: dict[str, Any], releases: list[dict[str, Any]]) -> None:
        recipe = (status.get("recipe") or {}).get("name", "?")
        rewards = metric_series(releases, "mean_reward")
        title = f"training of [b]{scenario}[/b] (recipe {recipe})"
        if not rewards and recipe != "sao":
            title += " — this recipe trains no weights; steps show here for weight recipes such as sao"
        self.query_one("#training-title", Static).update(title)
        for line, (_title, name) in zip(self.query(MetricLine), METRICS, strict=True):
            line.show(metric_series(releases, name))
        self.query_one("#training-facts", Static).update(facts_table(status, scenario))
