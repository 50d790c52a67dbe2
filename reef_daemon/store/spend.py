"""Token sums for spend: inference records' input and output tokens summed per scenario (or per harness release of
one scenario) and per model, so a price table can turn them into what was spent. Counted in SQL; no body is read."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from reef_contract import JUDGE_SCENARIO
from reef_daemon.harness.tables.live_scores import _RELEASE
from reef_daemon.store.engines.engine import Connection
from reef_daemon.store.engines.reader import Reader

_JUDGE_SOURCE = "json_extract(tags, '$.judge')"
_SUMS = (
    "count(*) AS records, coalesce(sum(input_tokens), 0) AS input_tokens,"
    " coalesce(sum(output_tokens), 0) AS output_tokens,"
    " count(CASE WHEN input_tokens IS NULL OR output_tokens IS NULL THEN 1 END) AS uncounted"
)


@dataclass(frozen=True)
class TokenSums:
    """One group's exchanges with one model: how many, their counted tokens, and how many had no token counts."""

    group: str  # the scenario, or the release id
    model: str | None
    records: int
    input_tokens: int
    output_tokens: int
    uncounted: int


class SpendReader:
    def __init__(self, reader: Reader) -> None:
        self._reader = reader

    async def by_scenario(self) -> list[TokenSums]:
        """Every scenario's exchanges, per model."""
        return await self._reader.run(
            lambda conn: _sums(
                conn,
                f"SELECT scenario AS grp, model, {_SUMS} FROM records WHERE type = 'inference'"  # noqa: S608
                " GROUP BY scenario, model",
                (),
            )
        )

    async def judge_by_source(self) -> list[TokenSums]:
        """The judge's calls (its own scenario), per source that asked (its `judge` tag: next-turn, group)."""
        query = (
            f"SELECT coalesce({_JUDGE_SOURCE}, 'other') AS grp, model, {_SUMS} FROM records"  # noqa: S608
            " WHERE scenario = ? AND type = 'inference' GROUP BY 1, model"
        )
        return await self._reader.run(lambda conn: _sums(conn, query, (JUDGE_SCENARIO,)))

    async def by_release(self, scenario: str, releases: Collection[str]) -> list[TokenSums]:
        """The exchanges of `scenario` tagged with each of `releases`, per model."""
        if not releases:
            return []
        marks = ",".join("?" * len(releases))
        query = (
            f"SELECT {_RELEASE} AS grp, model, {_SUMS} FROM records"  # noqa: S608
            f" WHERE scenario = ? AND type = 'inference' AND {_RELEASE} IN ({marks}) GROUP BY 1, model"
        )
        return await self._reader.run(lambda conn: _sums(conn, query, (scenario, *releases)))


def _sums(conn: Connection, query: str, parameters: tuple[str, ...]) -> list[TokenSums]:
    return [
        # int(): PostgreSQL sums integers as numeric (Decimal), SQLite as integers.
        TokenSums(
            str(row["grp"]),
            row["model"],
            int(row["records"]),
            int(row["input_tokens"]),
            int(row["output_tokens"]),
            int(row["uncounted"]),
        )
        for row in conn.execute(query, parameters).fetchall()
    ]
