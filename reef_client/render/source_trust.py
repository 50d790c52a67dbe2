"""Derived sources' agreement with people's scores, per scenario: a table for `reef status` and `reef sources`, a
line per source for the TUI."""

from __future__ import annotations

from collections.abc import Mapping

from rich.markup import escape
from rich.table import Table

from reef_client import SourceAgreement
from reef_client.render.formats import MISSING


def agreement_text(agreement: SourceAgreement) -> str:
    """κ and the records it is over: "κ 0.62 on 40 shared records"."""
    return f"κ {_kappa(agreement)} on {agreement['shared']} shared records"


def _kappa(agreement: SourceAgreement) -> str:
    return MISSING if agreement["kappa"] is None else f"{agreement['kappa']:.2f}"


def source_line(agreement: SourceAgreement) -> str:
    """κ and its records, then whether the source counts: "κ 0.62 on 40 shared records, counts"."""
    return f"{agreement_text(agreement)}, counts {_counts(agreement)}"


def _counts(agreement: SourceAgreement) -> str:
    """Yes, or no and why; a person's call in brackets."""
    reason = escape(agreement["reason"] or "")
    if not agreement["counts"]:
        return f"[red]no[/red]: {reason}"
    return f"yes ({reason})" if reason else "yes"


def sources_table(agreements: Mapping[str, Mapping[str, SourceAgreement]]) -> Table | None:
    """One row per scenario and derived source sharing records with people: n, κ, and whether it counts (and why
    not); None when there is none."""
    if not any(agreements.values()):
        return None
    table = Table(title="sources against people's scores", title_justify="left", expand=False)
    for column in ("scenario", "source", "shared", "κ", "counts"):
        table.add_column(column, justify="right" if column in ("shared", "κ") else "left")
    table.columns[0].overflow = "fold"  # a long scenario name folds, never cut: `reef sources enable` takes it
    for scenario, per_source in sorted(agreements.items()):
        for source, agreement in sorted(per_source.items()):
            table.add_row(scenario, source, str(agreement["shared"]), _kappa(agreement), _counts(agreement))
    return table
