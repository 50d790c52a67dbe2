"""Live scores: a scenario's inference records grouped by the harness release they were tagged with (the
`release` tag an installed harness sends), counted and summed in SQL over the index migration 6 made."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from reef_daemon.store.reader import Reader

_RELEASE = "json_extract(tags, '$.release')"
_SESSION = "json_extract(tags, '$.session')"


@dataclass(frozen=True)
class ReleaseTally:
    """Counts and sums over one release's records: sessions, records, and over the scored ones their count, sum,
    sum of squares and how many were low; when the first and last were made; the mean score per time window."""

    release_id: str
    sessions: int
    records: int
    scored: int
    total: float
    squares: float
    low: int
    first_at: float | None
    last_at: float | None
    trend: list[float | None] = field(default_factory=list)


class LiveScoreReader:
    def __init__(self, reader: Reader) -> None:
        self._reader = reader

    async def tallies(self, scenario: str, low_below: float, windows: int) -> list[ReleaseTally]:
        """One tally per release tagged on the scenario's inference records, oldest first. The trend splits the
        time from the first to the last scored record into `windows` equal windows."""
        return await self._reader.run(lambda conn: _tallies(conn, scenario, low_below, windows))


def _tallies(conn: sqlite3.Connection, scenario: str, low_below: float, windows: int) -> list[ReleaseTally]:
    where = f"scenario = ? AND type = 'inference' AND {_RELEASE} IS NOT NULL"
    rows = conn.execute(
        f"SELECT {_RELEASE} AS release_id, count(DISTINCT {_SESSION}) AS sessions, count(*) AS records,"  # noqa: S608
        " count(score) AS scored, coalesce(sum(score), 0) AS total, coalesce(sum(score * score), 0) AS squares,"
        " count(CASE WHEN score < ? THEN 1 END) AS low, min(created_at) AS first_at, max(created_at) AS last_at"
        f" FROM records WHERE {where} GROUP BY 1 ORDER BY min(created_at)",
        (low_below, scenario),
    ).fetchall()
    tallies: dict[str, ReleaseTally] = {}
    for row in rows:
        release_id = str(row["release_id"])
        tallies[release_id] = ReleaseTally(
            release_id, row["sessions"], row["records"], row["scored"], row["total"], row["squares"], row["low"],
            row["first_at"], row["last_at"], [None] * windows,
        )  # fmt: skip
    span = conn.execute(
        "SELECT min(created_at) AS first_scored, max(created_at) AS last_scored"  # noqa: S608
        f" FROM records WHERE {where} AND score IS NOT NULL",
        (scenario,),
    ).fetchone()
    if span["first_scored"] is None or windows < 1:
        return list(tallies.values())
    start = span["first_scored"]
    width = (span["last_scored"] - start) / windows or 1.0
    for row in conn.execute(
        f"SELECT {_RELEASE} AS release_id, min(CAST((created_at - ?) / ? AS INTEGER), ?) AS slot,"  # noqa: S608
        f" avg(score) AS mean FROM records WHERE {where} AND score IS NOT NULL GROUP BY 1, 2",
        (start, width, windows - 1, scenario),
    ):
        tallies[str(row["release_id"])].trend[int(row["slot"])] = float(row["mean"])
    return list(tallies.values())
