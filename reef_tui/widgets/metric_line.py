"""One training metric over the steps: its name, a sparkline, and the latest value."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label, Sparkline


class MetricLine(Horizontal):
    """`reward ▁▂▅▇ 0.81`; says `no steps yet` until there are values."""

    def __init__(self, title: str, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="metric-line")
        self.title = title

    def compose(self) -> ComposeResult:
        yield Label(self.title, classes="metric-title")
        yield Sparkline([], classes="metric-spark")
        yield Label("no steps yet", classes="metric-value")

    def show(self, points: list[tuple[int, float]]) -> None:
        """(step, value) for each step that has the metric, oldest first; the latest is named by its step."""
        self.query_one(Sparkline).data = [value for _step, value in points]
        last = f"{points[-1][1]:.4g} (step {points[-1][0]})" if points else "no steps yet"
        self.query_one(".metric-value", Label).update(last)
