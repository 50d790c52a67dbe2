"""Training of a weight scenario: reward and loss per step as sparklines, the current weight version, how many
units were waiting or judged ineligible and why."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from reef_client import Event, ReleaseRow, Status
from reef_client.render import formats
from reef_client.render.critic import critic_line
from reef_client.render.source_trust import source_line
from reef_contract import SOURCE_EVENT
from reef_tui.bindings import HELP
from reef_tui.screens.scenario_screen import ScenarioScreen
from reef_tui.widgets.metric_line import MetricLine

METRICS = (
    ("reward", "mean_reward"),
    ("loss", "loss"),
    ("critic loss", "critic_loss"),
    ("explained var", "explained_variance"),
)
Loaded = tuple[Status, list[ReleaseRow]]  # the daemon's status, the scenario's releases newest first


def metric_series(releases: list[ReleaseRow], name: str) -> list[tuple[int, float]]:
    """(step, `name`) from each training step whose metrics have it, oldest step first (releases arrive newest
    first)."""
    series = []
    for release in reversed(releases):
        value = (release.get("metrics") or {}).get(name)
        if release.get("operation") == "training" and isinstance(value, int | float) and not isinstance(value, bool):
            series.append((release["step"], float(value)))
    return series


def facts_table(status: Status, scenario: str) -> Table:
    """Steps, last step, weight version, waiting units, errors and ineligible counts by reason."""
    training = status["training"]["scenarios"].get(scenario)
    last = training.get("last_step") if training else None
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("steps", str(training.get("steps", 0) if training else 0))
    if last:
        when = formats.timestamp(last.get("created_at"))
        made = f" ({last['version']})" if last.get("version") else ""  # steps count all; versions what they made
        grid.add_row("last step", f"{last.get('step')}{made} {last.get('result')} at {when}")
    metrics = (last.get("metrics") if last else None) or {}
    weights = metrics.get("weight_version", status["runtime"].get("weight_version"))
    grid.add_row("weights", str(weights if weights is not None else formats.MISSING))
    critic = (status.get("recipe") or {}).get("critic")
    if critic:
        grid.add_row("critic", critic_line(critic))
    grid.add_row("waiting", str(training.get("waiting_units", 0) if training else 0))
    if training and training.get("error"):
        grid.add_row("error", Text(str(training["error"]), style="red"))
    ineligible = (training.get("ineligible") if training else None) or {}
    grid.add_row("ineligible", str(sum(ineligible.values())) if ineligible else "0")
    for reason, count in sorted(ineligible.items(), key=lambda item: -item[1]):
        grid.add_row("", f"{count}: {reason}")
    for source, agreement in sorted((status.get("sources") or {}).get(scenario, {}).items()):
        grid.add_row(f"source {source}", Text.from_markup(source_line(agreement)))
    return grid


class TrainingScreen(ScenarioScreen[Loaded]):
    """Live with every committed step of the scenario."""

    SUB_TITLE = "training"
    HELP_TITLE = "Training"
    NAME = "training"
    BINDINGS: ClassVar[list[BindingType]] = [HELP, Binding("ctrl+r", "reload", "Reload", show=False)]

    def compose_scenario(self) -> ComposeResult:
        with VerticalScroll(id="training-body"):
            for title, _name in METRICS:
                yield MetricLine(title)
            yield Static(id="training-facts")

    def _on_event(self, event: Event) -> None:
        super()._on_event(event)
        if event.scenario == self.scenario and event.type == SOURCE_EVENT:  # a source stopped counting, or counts
            self.reload()

    def fetch(self, scenario: str) -> Loaded:
        return self.reef.client.status(), self.reef.client.releases(scenario)

    def show_error(self, message: str) -> None:
        self.query_one("#training-facts", Static).update(Text(message, style="red"))

    def show_loaded(self, scenario: str, loaded: Loaded) -> None:
        status, releases = loaded
        recipe = (status.get("recipe") or {}).get("name", "?")
        rewards = metric_series(releases, "mean_reward")
        title = f"training of [b]{scenario}[/b] (recipe {recipe})"
        if not rewards and recipe != "sao":
            title += " — this recipe trains no weights; steps show here for weight recipes such as sao"
        self.query_one("#training-title", Static).update(title)
        for line, (_title, name) in zip(self.query(MetricLine), METRICS, strict=True):
            line.show(metric_series(releases, name))
        self.query_one("#training-facts", Static).update(facts_table(status, scenario))
