"""Reading records for an export: the inference records of a scenario that answered in full (or, when asked, were
cut), filtered by score, time and token data, in sequence order, a page at a time. A page ends at a row count or
at a number of stored bytes, whichever comes first, and holds its rows as stored; each is decoded only when its
line is written, so an export holds one page of stored bytes and one decoded record, whatever their sizes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from reef_daemon.store.engines.engine import Columns, Cursor
from reef_daemon.store.engines.reader import Reader
from reef_daemon.store.rows import decode_body

PAGE = 200
_COLUMNS = (
    "sequence, id, route, model, created_at, score, complete, request, answer, tokens, "
    "coalesce(length(request), 0) + coalesce(length(answer), 0) + coalesce(length(tokens), 0) AS size"
)


@dataclass(frozen=True)
class ExportQuery:
    scenario: str
    min_score: float | None = None
    since: float | None = None  # epoch seconds
    scored: bool = False
    with_tokens: bool = False
    include_cut: bool = False  # streams cut before their end (complete: false) too


@dataclass(frozen=True)
class ExportRow:
    """What an export line is made of: the exchange's request, its assembled answer, score and token data."""

    sequence: int
    id: str
    route: str | None
    model: str | None
    created_at: float
    score: float | None
    complete: bool
    request: Any
    answer: Any
    tokens: dict[str, Any] | None


@dataclass(frozen=True)
class StoredRow:
    """A row as read, its bodies still as stored; `size` is their length in bytes."""

    sequence: int
    id: str
    score: float | None
    size: int
    _row: Columns

    def decoded(self) -> ExportRow:
        """The row with its request, answer and token data parsed."""
        stored = self._row
        return ExportRow(
            sequence=stored["sequence"],
            id=stored["id"],
            route=stored["route"],
            model=stored["model"],
            created_at=stored["created_at"],
            score=stored["score"],
            complete=stored["complete"] != 0,
            request=decode_body(stored["request"]),
            answer=json.loads(stored["answer"]) if stored["answer"] else None,
            tokens=json.loads(stored["tokens"]) if stored["tokens"] else None,
        )


class ExportReader:
    def __init__(self, reader: Reader) -> None:
        self._reader = reader

    async def known(self, scenario: str) -> bool:
        """Whether the scenario exists (an archived one is known by its archived name)."""
        sql = "SELECT 1 FROM scenarios WHERE name = ?"
        return await self._reader.run(lambda conn: conn.execute(sql, (scenario,)).fetchone() is not None)

    async def count(self, query: ExportQuery) -> int:
        """How many records the query reads."""
        where, params = _where(query)
        sql = f"SELECT count(*) AS total FROM records WHERE {where}"  # noqa: S608
        found = await self._reader.run(lambda conn: conn.execute(sql, params).fetchone())
        return int(found["total"])

    async def page(self, query: ExportQuery, after: int, max_bytes: int) -> list[StoredRow]:
        """The next records after sequence `after`, oldest first: PAGE of them, or fewer where they pass
        `max_bytes` stored (at least one, however large); empty at the end."""
        where, params = _where(query)
        sql = f"SELECT {_COLUMNS} FROM records WHERE {where} AND sequence > ? ORDER BY sequence LIMIT ?"  # noqa: S608
        return await self._reader.run(lambda conn: _bounded(conn.execute(sql, (*params, after, PAGE)), max_bytes))

    async def by_sequence(self, sequences: list[int]) -> list[StoredRow]:
        """The records with these sequences, in that order (a missing one is left out)."""
        marks = ",".join("?" * len(sequences))
        sql = f"SELECT {_COLUMNS} FROM records WHERE sequence IN ({marks})"  # noqa: S608
        rows = await self._reader.run(lambda conn: _bounded(conn.execute(sql, sequences), None))
        found = {row.sequence: row for row in rows}
        return [found[s] for s in sequences if s in found]


def _where(query: ExportQuery) -> tuple[str, tuple[Any, ...]]:
    clauses = ["scenario = ?", "type = 'inference'", "status < 400", "answer IS NOT NULL"]
    params: list[Any] = [query.scenario]
    if not query.include_cut:
        clauses.append("coalesce(complete, 1) != 0")
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


def _bounded(cursor: Cursor, max_bytes: int | None) -> list[StoredRow]:
    """The cursor's rows, up to the first that brings them past `max_bytes` (None: all of them)."""
    rows: list[StoredRow] = []
    total = 0
    for stored in cursor:
        rows.append(StoredRow(stored["sequence"], stored["id"], stored["score"], stored["size"], stored))
        total += stored["size"]
        if max_bytes is not None and total >= max_bytes:
            break
    cursor.close()
    return rows
