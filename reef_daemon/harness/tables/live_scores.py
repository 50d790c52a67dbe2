"""Live scores: a scenario's inference records grouped by the harness release they were tagged with (the
`release` tag an installed harness sends), counted and summed in SQL over the index migration 8 made. Only the
scenario's own releases count: a tag is whatever a client sends, so other values are left out.

The canary check after each report reads sums over two releases since the canary started; the index holds the
release, time and score, so that read touches only the index entries of that period.

A record's score is the one of the first source in precedence that scored it (a person's first). Told to count only
some sources, the reads take each record's score from those sources alone (`record_scores`), off the index."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from reef_contract import REPORT_SOURCES
from reef_daemon.store.engines.engine import Connection
from reef_daemon.store.engines.reader import Reader
from reef_daemon.store.source_scores import score_of

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


@dataclass(frozen=True)
class PeriodSums:
    """One release's scored records in a period: how many, the sum and the sum of squares of their scores."""

    release_id: str
    scored: int
    total: float
    squares: float


class LiveScoreReader:
    def __init__(self, reader: Reader) -> None:
        self._reader = reader

    async def tallies(
        self,
        scenario: str,
        releases: Collection[str],
        low_below: float,
        windows: int,
        sources: Collection[str] = REPORT_SOURCES,
    ) -> list[ReleaseTally]:
        """One tally per release of `releases` tagged on the scenario's inference records, oldest first, counting
        the scores of `sources`. The trend splits the time from the first to the last scored record into `windows`
        equal windows."""
        table = _scored_records(sources)
        return await self._reader.run(lambda conn: _tallies(conn, table, scenario, list(releases), low_below, windows))

    async def sums(
        self, scenario: str, releases: Collection[str], since: float, sources: Collection[str] = REPORT_SOURCES
    ) -> list[PeriodSums]:
        """The score sums (of `sources`) of each release's records made at `since` or later, in the order given."""
        table = _scored_records(sources)
        return await self._reader.run(lambda conn: _sums(conn, table, scenario, list(releases), since))


def _scored_records(sources: Collection[str]) -> str:
    """What the reads select from: the records as they are, or with each one's score from `sources` alone."""
    if set(REPORT_SOURCES) <= set(sources):
        return "records"
    return f"(SELECT scenario, type, tags, created_at, {score_of(sources)} AS score FROM records) AS records"  # noqa: S608


def _sums(conn: Connection, table: str, scenario: str, releases: list[str], since: float) -> list[PeriodSums]:
    found: list[PeriodSums] = []
    for release_id in releases:
        row = conn.execute(
            "SELECT count(score) AS scored, coalesce(sum(score), 0) AS total,"  # noqa: S608
            f" coalesce(sum(score * score), 0) AS squares FROM {table}"
            f" WHERE scenario = ? AND type = 'inference' AND {_RELEASE} = ? AND created_at >= ? AND score IS NOT NULL",
            (scenario, release_id, since),
        ).fetchone()
        found.append(PeriodSums(release_id, row["scored"], float(row["total"]), float(row["squares"])))
    return found


def _tallies(
    conn: Connection, table: str, scenario: str, releases: list[str], low_below: float, windows: int
) -> list[ReleaseTally]:
    if not releases:
        return []
    marks = ",".join("?" * len(releases))
    where = f"scenario = ? AND type = 'inference' AND {_RELEASE} IN ({marks})"
    known = (scenario, *releases)
    rows = conn.execute(
        f"SELECT {_RELEASE} AS release_id, count(DISTINCT {_SESSION}) AS sessions, count(*) AS records,"  # noqa: S608
        " count(score) AS scored, coalesce(sum(score), 0) AS total, coalesce(sum(score * score), 0) AS squares,"
        " count(CASE WHEN score < ? THEN 1 END) AS low, min(created_at) AS first_at, max(created_at) AS last_at"
        f" FROM {table} WHERE {where} GROUP BY 1 ORDER BY min(created_at)",
        (low_below, *known),
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
        f" FROM {table} WHERE {where} AND score IS NOT NULL",
        known,
    ).fetchone()
    if span["first_scored"] is None or windows < 1:
        return list(tallies.values())
    start = span["first_scored"]
    width = (span["last_scored"] - start) / windows or 1.0
    # `placed` is the record's place in windows; its floor is spelt with CASE since SQLite's CAST truncates where
    # PostgreSQL's rounds (a rounded-up CAST is one too many).
    for row in conn.execute(
        "SELECT release_id, CASE WHEN slot > ? THEN ? ELSE slot END AS slot, avg(score) AS mean FROM ("  # noqa: S608
        " SELECT release_id, score, CASE WHEN CAST(placed AS INTEGER) > placed THEN CAST(placed AS INTEGER) - 1"
        " ELSE CAST(placed AS INTEGER) END AS slot FROM ("
        f" SELECT {_RELEASE} AS release_id, score, (created_at - ?) / ? AS placed FROM {table}"
        f" WHERE {where} AND score IS NOT NULL) AS placed_records) AS slotted GROUP BY 1, 2",
        (windows - 1, windows - 1, start, width, *known),
    ):
        tallies[str(row["release_id"])].trend[int(row["slot"])] = float(row["mean"])
    return list(tallies.values())
