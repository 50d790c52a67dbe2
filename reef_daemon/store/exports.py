"""Reading records for an export: the inference records of a scenario that answered, filtered by score, time and
token data, a page at a time in sequence order, so an export of any size holds one page in memory."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from reef_daemon.store.reader import Reader
from reef_daemon.store.rows import decode_body

PAGE = 200
_COLUMNS = "sequence, id, route, model, created_at, score, request, answer, tokens"


@dataclass(frozen=True)
class ExportQuery:
    scenario: str
    min_score: float | None = None
    since: float | None = None  # epoch seconds
    scored: bool = False
    with_tokens: bool = False


@dataclass(frozen=True)
class ExportRow:
    """What an export line is made of: the exchange's request, its assembled answer, score and token data."""

    sequence: int
    id: str
    route: str | None
    model: str | None
    created_at: float
    score: float | None
    request: Any
    answer: Any
    tokens: dict[str, Any] | None


class ExportReader:
    def __init__(self, reader: Reader) -> None:
        self._reader = reader

    async def count(self, query: ExportQuery) -> int:
        """How many records the query reads."""
        where, params = _where(query)
        sql = f"SELECT count(*) AS total FROM records WHERE {where}"  # noqa: S608
        found = await self._reader.run(lambda conn: conn.execute(sql, params).fetchone())
        return int(found["total"])

    async def page(self, query: ExportQuery, after: int) -> list[ExportRow]:
        """The next page of records after sequence `after`, oldest first; empty at the end."""
        where, params = _where(query)
        sql = f"SELECT {_COLUMNS} FROM records WHERE {where} AND sequence > ? ORDER BY sequence LIMIT ?"  # noqa: S608
        return await self._reader.run(lambda conn: _rows(conn.execute(sql, (*params, after, PAGE)).fetchall()))

    async def by_sequence(self, sequences: list[int]) -> list[ExportRow]:
        """The records with these sequences, in that order (a missing one is left out)."""
        marks = ",".join("?" * len(sequences))
        sql = f"SELECT {_COLUMNS} FROM records WHERE sequence IN ({marks})"  # noqa: S608
        rows = await self._reader.run(lambda conn: _rows(conn.execute(sql, sequences).fetchall()))
        found = {row.sequence: row for row in rows}
        return [found[s] for s in sequences if s in found]


def _where(query: ExportQuery) -> tuple[str, tuple[Any, ...]]:
    clauses = ["scenario = ?", "type = 'inference'", "status < 400", "answer IS NOT NULL"]
    params: list[Any] = [query.scenario]
    if query.min_score is not None:
        clauses.append("score >= ?")
        params.append(query.min_score)
    if query.scored:
        clauses.append("score IS NOT NULL")
    if query.since is not None:
        clauses.append("created_at >= ?")
        params.append(query.since)
    if query.with_tokens:
        clauses.append("tokens IS NOT NULL")
    return " AND ".join(clauses), tuple(params)


def _rows(found: list[sqlite3.Row]) -> list[ExportRow]:
    rows: list[ExportRow] = []
    for stored in found:
        rows.append(
            ExportRow(
                sequence=stored["sequence"],
                id=stored["id"],
                route=stored["route"],
                model=stored["model"],
                created_at=stored["created_at"],
                score=stored["score"],
                request=decode_body(stored["request"]),
                answer=json.loads(stored["answer"]) if stored["answer"] else None,
                tokens=json.loads(stored["tokens"]) if stored["tokens"] else None,
            )
        )
    return rows
