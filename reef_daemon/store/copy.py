"""Moving a deployment's store between engines: `reef store copy --from sqlite:PATH --to postgresql://…` (and back).

Every table is copied in key order, a batch per transaction, with `INSERT … ON CONFLICT DO NOTHING`: a row already
there is left as it is, so a copy run again (after an interruption, or twice) adds only what is missing, and
starts its sequence-keyed tables (records, events) after the last row the destination holds. Both databases are
brought to this reef's schema first. At the end each table's rows are counted on both sides; a destination that
holds fewer than the source is an error. Stop the daemons of both stores while a copy runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reef_daemon.store.engine import Connection, Engine, open_engine
from reef_daemon.store.schema import migrate

BATCH = 500
# Each table and its key, in an order where what a row refers to is copied before it.
TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("scenarios", ("name",)),
    ("records", ("sequence",)),
    ("report_references", ("record_id", "report_sequence")),
    ("events", ("sequence",)),
    ("steps", ("scenario", "step")),
    ("consumed_records", ("record_id",)),
    ("ineligible_records", ("record_id",)),
    ("recipe_cursors", ("scenario",)),
    ("harness_requests", ("id",)),
    ("eval_tasks", ("id",)),
    ("replay_decisions", ("record_id",)),
    ("canaries", ("scenario",)),
    ("release_homes", ("scenario",)),
    ("source_trust", ("scenario", "source")),
)
_BINARY = {("records", "request"), ("records", "response")}  # BLOB/BYTEA: SQLite may hold text there


@dataclass(frozen=True)
class TableCopy:
    """One table's outcome: rows in the source, rows written now, rows the destination holds at the end."""

    table: str
    source: int
    copied: int
    destination: int

    @property
    def complete(self) -> bool:
        return self.destination >= self.source


Progress = Callable[[str, int, int], None]  # (table, rows gone through so far, rows in the source)


class CopyFailed(Exception):
    """The copy cannot start or did not complete; the message says why."""


def copy_store(source_url: str, destination_url: str, progress: Progress | None = None) -> list[TableCopy]:
    """Copy every table from the store at `source_url` to the one at `destination_url` (each a postgresql://
    URL or sqlite:PATH); returns what happened to each table. Raises CopyFailed when counts do not add up."""
    source, destination = _engine(source_url), _engine(destination_url)
    if not source.shared and not Path(source.path).is_file():
        raise CopyFailed(f"there is no store at {source.path}")
    if source.describe() == destination.describe():
        raise CopyFailed("--from and --to name the same store")
    with _connected(source) as reading, _connected(destination) as writing:
        migrate(reading, source)
        migrate(writing, destination)
        outcomes = [_copy_table(reading, writing, table, key, progress) for table, key in TABLES]
    short = [o for o in outcomes if not o.complete]
    if short:
        detail = ", ".join(f"{o.table} {o.destination} of {o.source}" for o in short)
        raise CopyFailed(f"the destination holds fewer rows than the source: {detail}")
    return outcomes


def _engine(url: str) -> Engine:
    if not url.startswith(("postgresql://", "postgres://", "sqlite:")):
        raise CopyFailed(f"'{url}' is neither a postgresql://… URL nor sqlite:PATH")
    return open_engine(url, Path("."))


@contextlib.contextmanager
def _connected(engine: Engine) -> Iterator[Connection]:
    conn = engine.connect()
    try:
        yield conn
    finally:
        conn.close()


def _count(conn: Connection, table: str) -> int:
    return int(conn.execute(f"SELECT count(*) AS total FROM {table}").fetchone()["total"])  # noqa: S608


def _copy_table(
    reading: Connection, writing: Connection, table: str, key: tuple[str, ...], progress: Progress | None
) -> TableCopy:
    total = _count(reading, table)
    order = ", ".join(key)
    after: tuple[Any, ...] | None = None
    if key == ("sequence",):  # resume where the destination ends
        last = writing.execute(f"SELECT max(sequence) AS last FROM {table}").fetchone()["last"]  # noqa: S608
        after = (last,) if last is not None else None
    done = 0 if after is None else _count_upto(reading, table, after[0])
    copied = 0
    while True:
        where, params = "", ()
        if after is not None:
            marks = ", ".join("?" * len(key))
            where, params = f"WHERE ({order}) > ({marks})", after
        rows = reading.execute(
            f"SELECT * FROM {table} {where} ORDER BY {order} LIMIT ?",  # noqa: S608
            (*params, BATCH),
        ).fetchall()
        if not rows:
            break
        columns = list(rows[0].keys())
        marks = ", ".join("?" * len(columns))
        values = [[_value(table, column, row[column]) for column in columns] for row in rows]
        writing.execute("BEGIN")
        cursor = writing.executemany(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) ON CONFLICT DO NOTHING",  # noqa: S608
            values,
        )
        writing.execute("COMMIT")
        copied += max(cursor.rowcount, 0)
        done += len(rows)
        after = tuple(rows[-1][column] for column in key)
        if progress is not None:
            progress(table, done, total)
    if progress is not None and total == 0:
        progress(table, 0, 0)
    return TableCopy(table, total, copied, _count(writing, table))


def _count_upto(conn: Connection, table: str, sequence: int) -> int:
    return int(conn.execute(f"SELECT count(*) AS n FROM {table} WHERE sequence <= ?", (sequence,)).fetchone()["n"])  # noqa: S608


def _value(table: str, column: str, value: Any) -> Any:
    if (table, column) in _BINARY and isinstance(value, str):
        return value.encode()
    if isinstance(value, memoryview):
        return bytes(value)
    return value
