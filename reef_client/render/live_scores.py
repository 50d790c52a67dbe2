"""Per-version live scores in words and marks, for `reef versions` and the TUI: sessions, records, scored records,
the mean score with its 95% interval, the share of low scores, and a sparkline of the score over time."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.table import Table

from reef_client import CanaryState, ReleaseRow, VersionScore, VersionScores
from reef_client.render.formats import MISSING
from reef_client.render.spend import spend_text

LIVE_HEADERS = ("sessions", "records", "scored", "mean [95% CI]", "low")
_BARS = "▁▂▃▄▅▆▇█"


def live_cells(score: VersionScore | None) -> tuple[str, str, str, str, str]:
    """The cells under LIVE_HEADERS; dashes for a version no tagged session ran."""
    if score is None:
        return "0", "0", "0", MISSING, MISSING
    return (
        str(score["sessions"]),
        str(score["records"]),
        str(score["scored"]),
        mean_text(score),
        MISSING if score["low_share"] is None else f"{score['low_share']:.0%}",
    )


def mean_text(score: VersionScore) -> str:
    """`0.62 [0.54, 0.70]`; the mean alone for a single score; a dash for none."""
    if score["mean"] is None:
        return MISSING
    interval = score["interval"]
    if interval is None:
        return f"{score['mean']:.2f}"
    return f"{score['mean']:.2f} [{interval['low']:.2f}, {interval['high']:.2f}]"


def canary_mark(release_id: str | None, canary: CanaryState | None) -> str:
    """`canary 20%` on the canary's row; empty elsewhere."""
    if canary is None or release_id is None or canary["release_id"] != release_id:
        return ""
    return f"canary {canary['share']:g}%"


def sparkline(trend: Sequence[float | None], low: float, high: float) -> str:
    """One bar per time window, its height the mean score there on the scale `low`..`high`; a space where the
    version had no scored record in that window."""
    span = (high - low) or 1.0
    bars = []
    for value in trend:
        if value is None:
            bars.append(" ")
            continue
        level = min(max((value - low) / span, 0.0), 1.0)
        bars.append(_BARS[round(level * (len(_BARS) - 1))])
    return "".join(bars)


def live_rows(scores: VersionScores, rows: Sequence[ReleaseRow]) -> list[tuple[str, VersionScore]]:
    """(version, score) for every release tagged sessions ran, oldest first; a release no row names shows as the
    first 8 characters of its id."""
    versions = {row["release_id"]: row["version"] for row in rows if row["release_id"] and row["version"]}
    return [(versions.get(score["release_id"], score["release_id"][:8]), score) for score in scores["versions"]]


def live_table(scores: VersionScores, rows: Sequence[ReleaseRow]) -> Table:
    """The live scores of each version real sessions ran, with the canary marked and the score's trend."""
    table = Table(
        box=box.SIMPLE_HEAD,  # no column rules and one space between columns: seven columns fit 80 characters
        collapse_padding=True,
        pad_edge=False,
        title="live scores of tagged sessions",
        caption=f"95% intervals ({scores['method']}); low = below {scores['low_below']:g} "
        f"on {scores['score_min']:g}..{scores['score_max']:g}",
    )
    for column in ("version", *LIVE_HEADERS, "trend"):
        table.add_column(column, no_wrap=True)
    for version, score in live_rows(scores, rows):
        mark = canary_mark(score["release_id"], scores["canary"])
        trend = sparkline(score["trend"], scores["score_min"], scores["score_max"])
        table.add_row(f"{version} {mark}" if mark else version, *live_cells(score), trend)
    if not scores["versions"]:
        table.add_row("none yet", *live_cells(None), "")
    return table


def spend_table(scores: VersionScores, rows: Sequence[ReleaseRow]) -> Table:
    """What each version's tagged sessions cost, beside its mean score (prices: telemetry.prices)."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="spend of tagged sessions")
    for column in ("version", "records", "mean", "spend"):
        table.add_column(column, no_wrap=True)
    for version, score in live_rows(scores, rows):
        mean = MISSING if score["mean"] is None else f"{score['mean']:.2f}"
        table.add_row(version, str(score["records"]), mean, spend_text(score.get("spend")))
    return table
