"""A release's evidence, as the versions screen shows it beside the diff: the gate's verdict in one line, then one
row per task (task, kind, served, candidate, verdict, judge's reason)."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from reef_client.render.evidence import EVIDENCE_HEADERS, evidence_cells, evidence_of, evidence_summary


def evidence_view(metrics: dict[str, Any]) -> RenderableType | None:
    """The evidence of a step's metrics, or None when the step kept none."""
    evidence = evidence_of(metrics)
    if evidence is None:
        return None
    style = "green" if evidence["passed"] and evidence["ran"] else ("red" if not evidence["passed"] else "dim")
    summary = Text(evidence_summary(evidence), style=style)
    if not evidence["rows"]:
        return summary
    table = Table(expand=True, show_edge=False, pad_edge=False)
    for column in EVIDENCE_HEADERS:
        table.add_column(column, no_wrap=column in ("kind", "verdict"), overflow="fold")
    for row in evidence["rows"]:
        cells = evidence_cells(row)
        verdict_style = {"better": "green", "worse": "red", "not run": "yellow"}.get(row["verdict"], "")
        table.add_row(*cells[:4], Text(cells[4], style=verdict_style), cells[5])
    return Group(summary, table)
