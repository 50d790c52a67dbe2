"""Moving a deployment's store between engines: `reef store copy --from sqlite:PATH --to postgresql://…` (and back),
into an empty store or one already in use (a team's daemons recording into it while the copy runs).

Records and events share one sequence, which every store numbers on its own: the source's numbers may be taken at
the destination. So they are copied together in source order, each batch in one write transaction that takes the
next free numbers as a daemon's writer does (under the shared store's write lock), keeping the source's numbers
where they are free (an empty destination gets them as they were) and their order always. A record already at the
destination (its id; a copy run again, or resumed) is left as it is; an event, which has no id, is known by its
type, scenario, time and data. A report's references, and a recipe's read position, follow their records' new
numbers. Each record's scores by source (`record_scores`) are merged, the newer score of one source winning; the
other tables are copied by their keys, a row already there kept. A row whose key the destination holds with other
values (a scenario trained in both stores) refuses the copy before anything is written.

At the end every source row is looked up at the destination by what identifies it (a record's id, a score's record
and source, a step's scenario and number …): one missing is an error. A SQLite destination is written by one
daemon's writer, which counts its own sequence: one open in another process (that daemon) refuses the copy (a
PostgreSQL one's daemons may run).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reef_daemon.store.engines.engine import Connection, Engine, max_sequence
from reef_daemon.store.engines.opening import open_engine
from reef_daemon.store.engines.schema import migrate

BATCH = 500
# The tables copied by their keys, in an order where what a row refers to is copied before it. Records, events and
# report references are copied as one sequence; recipe cursors and record scores are merged (see below).
KEYED_TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("scenarios", ("name",)),
    ("steps", ("scenario", "step")),
    ("consumed_records", ("record_id",)),
    ("ineligible_records", ("record_id",)),
    ("harness_requests", ("id",)),
    ("eval_tasks", ("id",)),
    ("replay_decisions", ("record_id",)),
    ("canaries", ("scenario",)),
    ("release_homes", ("scenario",)),
    ("source_trust", ("scenario", "source")),
)
# A scenario of the same name in both stores is one scenario (the destination's row stays); any other keyed row
# that differs is history of its own, which a copy would lose.
_MERGED_BY_NAME = {"scenarios"}
# What identifies a row in either store, whatever its sequence there: a view of the table, and its columns.
_REFERENCES_VIEW = (
    "(SELECT refs.record_id AS record_id, reports.id AS report_id FROM report_references AS refs"
    " JOIN records AS reports ON reports.sequence = refs.report_sequence) AS refs"
)
_IDENTITIES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("records", "records", ("id",)),
    ("report_references", _REFERENCES_VIEW, ("record_id", "report_id")),
    ("record_scores", "record_scores", ("record_id", "source")),
    ("recipe_cursors", "recipe_cursors", ("scenario",)),
    *((table, table, key) for table, key in KEYED_TABLES),
)
_SHM_DMS_BYTE = 128  # SQLite's unix VFS: the byte of the WAL index every open connection holds a shared lock on
_BINARY = {("records", "request"), ("records", "response")}  # BLOB/BYTEA: SQLite may hold text there
_MERGE_SCORE = (
    "INSERT INTO record_scores (record_id, source, score, report_id, created_at) VALUES (?,?,?,?,?)"
    " ON CONFLICT (record_id, source) DO UPDATE SET score = excluded.score, report_id = excluded.report_id,"
    " created_at = excluded.created_at WHERE excluded.created_at > record_scores.created_at"
)


@dataclass(frozen=True)
class TableCopy:
    """One table's outcome: rows in the source, rows written now, and how many of the source's rows the destination
    holds at the end (looked up by what identifies each)."""

    table: str
    source: int
    copied: int
    present: int

    @property
    def complete(self) -> bool:
        return self.present >= self.source


Progress = Callable[[str, int, int], None]  # (table, rows gone through so far, rows in the source)


class CopyFailed(Exception):
    """The copy cannot start or did not complete; the message says why."""


def copy_store(source_url: str, destination_url: str, progress: Progress | None = None) -> list[TableCopy]:
    """Copy every row from the store at `source_url` to the one at `destination_url` (each a postgresql:// URL or
    sqlite:PATH); returns what happened to each table. Raises CopyFailed when a row would be lost or is missing."""
    source, destination = _engine(source_url), _engine(destination_url)
    if not source.shared and not Path(source.path).is_file():
        raise CopyFailed(f"there is no store at {source.path}")
    if source.describe() == destination.describe():
        raise CopyFailed("--from and --to name the same store")
    if not destination.shared and _open_elsewhere(Path(destination.path)):
        raise CopyFailed(
            f"{destination.path} is open in another process (its daemon?): stop that first; its writer counts the"
            " sequence numbers a copy would take (a PostgreSQL store's daemons may keep running)"
        )
    with _connected(source) as reading, _connected(destination) as writing:
        migrate(reading, source)
        migrate(writing, destination)
        _refuse_differing(reading, writing)
        had = {row["name"] for row in writing.execute("SELECT name FROM scenarios")}
        copied = _copy_sequence(reading, writing, destination, had, progress)
        for table, key in KEYED_TABLES:
            copied[table] = _copy_keyed(reading, writing, table, key, progress)
        copied["recipe_cursors"] = _copy_cursors(reading, writing, had)
        copied["record_scores"] = _merge_scores(reading, writing)
        outcomes = [_checked(reading, writing, table, copied.get(table, 0), had) for table in _checked_tables()]
    short = [o for o in outcomes if not o.complete]
    if short:
        detail = ", ".join(f"{o.table} {o.present} of {o.source}" for o in short)
        raise CopyFailed(
            f"the destination lacks rows of the source: {detail} found; run the copy again (a source written"
            " meanwhile adds rows)"
        )
    return outcomes


def _open_elsewhere(path: Path) -> bool:
    """Whether another process has the SQLite file open: each connection holds a shared lock on the "DMS" byte of
    its WAL index (`-shm`, byte 128 in SQLite's unix VFS) for as long as it is open, which a write lock conflicts
    with. Run in a process that has not opened the file itself (closing this descriptor would drop its locks)."""
    index = path.with_name(path.name + "-shm")
    try:
        descriptor = os.open(index, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.lockf(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _SHM_DMS_BYTE)
    except OSError:
        return True
    else:
        fcntl.lockf(descriptor, fcntl.LOCK_UN, 1, _SHM_DMS_BYTE)
        return False
    finally:
        os.close(descriptor)


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


def _pages(conn: Connection, source: str, key: tuple[str, ...], columns: str = "*") -> Iterator[list[Any]]:
    """The rows of a table (or view), BATCH at a time, in key order."""
    order = ", ".join(key)
    marks = ", ".join("?" * len(key))
    after: tuple[Any, ...] | None = None
    while True:
        where = f"WHERE ({order}) > ({marks})" if after is not None else ""
        rows = conn.execute(
            f"SELECT {columns} FROM {source} {where} ORDER BY {order} LIMIT ?",  # noqa: S608
            (*(after or ()), BATCH),
        ).fetchall()
        if not rows:
            return
        yield rows
        after = tuple(rows[-1][column] for column in key)


def _at_destination(writing: Connection, source: str, key: tuple[str, ...], rows: Sequence[Any]) -> dict[Any, Any]:
    """The destination's rows with the keys of `rows` (looked up by the key's first column), by key."""
    firsts = sorted({row[key[0]] for row in rows})
    marks = ", ".join("?" * len(firsts))
    found = writing.execute(f"SELECT * FROM {source} WHERE {key[0]} IN ({marks})", firsts).fetchall()  # noqa: S608
    return {tuple(row[column] for column in key): row for row in found}


def _comparable(table: str, row: Any) -> dict[str, Any]:
    columns: list[str] = row.keys()  # a row iterates over its values
    return {column: _value(table, column, row[column]) for column in columns}


def _refuse_differing(reading: Connection, writing: Connection) -> None:
    """Refuse, before anything is written, a copy that would keep the destination's row over a different one of the
    source (a scenario's step, canary or release home that both stores have)."""
    for table, key in KEYED_TABLES:
        if table in _MERGED_BY_NAME:
            continue
        for rows in _pages(reading, table, key):
            there = _at_destination(writing, table, key, rows)
            for row in rows:
                held = there.get(tuple(row[column] for column in key))
                if held is not None and _comparable(table, held) != _comparable(table, row):
                    named = ", ".join(f"{column} {row[column]!r}" for column in key)
                    raise CopyFailed(
                        f"both stores hold {table} with {named}, different in each: copying would lose one; copy"
                        " into a store without it (or archive that scenario in one of them first)"
                    )


def _copy_keyed(
    reading: Connection, writing: Connection, table: str, key: tuple[str, ...], progress: Progress | None
) -> int:
    total, done, copied = _count(reading, table), 0, 0
    for rows in _pages(reading, table, key):
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
        if progress is not None:
            progress(table, done, total)
    if progress is not None and total == 0:
        progress(table, 0, 0)
    return copied


def _copy_sequence(
    reading: Connection, writing: Connection, destination: Engine, had: set[str], progress: Progress | None
) -> dict[str, int]:
    """Records, their reports' references and events, in source order, into the destination's next free numbers
    (but the changes of a scenario the destination `had`: its row, and so its history, is the destination's)."""
    totals = {"records": _count(reading, "records"), "events": _count(reading, "events")}
    done = {"records": 0, "events": 0}
    copied = {"records": 0, "events": 0, "report_references": 0}
    known_events = _event_prints(writing)
    offset, after = 0, 0
    while True:
        records = _after(reading, "records", after)
        events = _after(reading, "events", after)
        if not records and not events:
            break
        # Up to the end of the shorter full page: what lies beyond it in the other table comes with the next batch.
        full = [rows[-1]["sequence"] for rows in (records, events) if len(rows) == BATCH]
        last = min(full) if full else max(rows[-1]["sequence"] for rows in (records, events) if rows)
        records = [row for row in records if row["sequence"] <= last]
        events = [row for row in events if row["sequence"] <= last]
        try:
            free = max(destination.begin_write(writing, 0), max_sequence(writing) + 1)
            there = _present_ids(writing, [row["id"] for row in records]) if records else set()
            new_records = [row for row in records if row["id"] not in there]
            new_events = [row for row in events if not _merged(row, had) and _event_print(row) not in known_events]
            firsts = [rows[0]["sequence"] for rows in (new_records, new_events) if rows]
            if firsts:
                offset = max(offset, free - min(firsts))
                _insert(writing, "records", new_records, offset)
                copied["report_references"] += _insert_references(reading, writing, new_records, offset)
                _insert(writing, "events", new_events, offset)
            writing.execute("COMMIT")
        except BaseException:
            if writing.in_transaction:
                writing.execute("ROLLBACK")
            raise
        known_events.update(_event_print(row) for row in new_events)
        copied["records"] += len(new_records)
        copied["events"] += len(new_events)
        after = last
        for table, rows in (("records", records), ("events", events)):
            done[table] += len(rows)
            if progress is not None and rows:
                progress(table, done[table], totals[table])
    return copied


def _after(conn: Connection, table: str, sequence: int) -> list[Any]:
    return conn.execute(
        f"SELECT * FROM {table} WHERE sequence > ? ORDER BY sequence LIMIT ?",  # noqa: S608
        (sequence, BATCH),
    ).fetchall()


def _present_ids(conn: Connection, ids: Sequence[str]) -> set[str]:
    marks = ", ".join("?" * len(ids))
    return {row["id"] for row in conn.execute(f"SELECT id FROM records WHERE id IN ({marks})", ids)}  # noqa: S608


def _insert(writing: Connection, table: str, rows: Sequence[Any], offset: int) -> None:
    if not rows:
        return
    columns = list(rows[0].keys())
    marks = ", ".join("?" * len(columns))
    writing.executemany(
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})",  # noqa: S608
        [
            [row[column] + offset if column == "sequence" else _value(table, column, row[column]) for column in columns]
            for row in rows
        ],
    )


def _insert_references(reading: Connection, writing: Connection, records: Sequence[Any], offset: int) -> int:
    """The references of the reports among `records`, to their reports' new numbers; how many."""
    reports = [row["sequence"] for row in records if row["type"] == "report"]
    if not reports:
        return 0
    marks = ", ".join("?" * len(reports))
    references = reading.execute(
        f"SELECT record_id, report_sequence FROM report_references WHERE report_sequence IN ({marks})",  # noqa: S608
        reports,
    ).fetchall()
    writing.executemany(
        "INSERT INTO report_references (record_id, report_sequence) VALUES (?, ?) ON CONFLICT DO NOTHING",
        [(row["record_id"], row["report_sequence"] + offset) for row in references],
    )
    return len(references)


def _event_print(row: Any) -> bytes:
    """What tells an event from another in either store (events have no id): its type, scenario, time and data."""
    known = json.dumps([row["type"], row["scenario"], row["created_at"], row["data"]])
    return hashlib.sha256(known.encode()).digest()


def _merged(event: Any, had: set[str]) -> bool:
    """Whether an event is a change of a scenario the destination had, whose row (and history) it keeps."""
    return bool(event["type"] == "scenario" and event["scenario"] in had)


def _event_prints(conn: Connection) -> set[bytes]:
    return {_event_print(row) for rows in _pages(conn, "events", ("sequence",)) for row in rows}


def _copy_cursors(reading: Connection, writing: Connection, had: set[str]) -> int:
    """A scenario's read position, for a scenario the destination has none for: at the new number of the last
    record the source's position had passed (records keep their order, so what was after it stays after it); for a
    scenario the destination had before, at its start, so that its own records, numbered below, are read too (what
    a step consumed or judged ineligible, in either store, is not read again)."""
    copied = 0
    for row in (row for rows in _pages(reading, "recipe_cursors", ("scenario",)) for row in rows):
        passed = reading.execute(
            "SELECT id FROM records WHERE sequence <= ? ORDER BY sequence DESC LIMIT 1", (row["sequence"],)
        ).fetchone()
        moved = (
            writing.execute("SELECT sequence FROM records WHERE id = ?", (passed["id"],)).fetchone()
            if passed is not None and row["scenario"] not in had
            else None
        )
        writing.execute("BEGIN")
        cursor = writing.execute(
            "INSERT INTO recipe_cursors (scenario, sequence) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (row["scenario"], moved["sequence"] if moved is not None else 0),
        )
        writing.execute("COMMIT")
        copied += max(cursor.rowcount, 0)
    return copied


def _merge_scores(reading: Connection, writing: Connection) -> int:
    """Each record's score by source, the newer of the two stores' winning; how many were written."""
    copied = 0
    for rows in _pages(reading, "record_scores", ("record_id", "source")):
        writing.execute("BEGIN")
        cursor = writing.executemany(
            _MERGE_SCORE,
            [(row["record_id"], row["source"], row["score"], row["report_id"], row["created_at"]) for row in rows],
        )
        writing.execute("COMMIT")
        copied += max(cursor.rowcount, 0)
    return copied


def _checked_tables() -> list[str]:
    return ["events", *(table for table, _view, _key in _IDENTITIES)]


def _checked(reading: Connection, writing: Connection, table: str, copied: int, had: set[str]) -> TableCopy:
    """How many of the source's rows of `table` the destination holds, each looked up by what identifies it."""
    if table == "events":
        prints = [
            _event_print(row)
            for rows in _pages(reading, "events", ("sequence",))
            for row in rows
            if not _merged(row, had)
        ]
        held = _event_prints(writing)
        return TableCopy(table, len(prints), copied, sum(1 for one in prints if one in held))
    view, key = next((view, key) for name, view, key in _IDENTITIES if name == table)
    total = present = 0
    for rows in _pages(reading, view, key, ", ".join(key)):
        there = _at_destination(writing, view, key, rows)
        total += len(rows)
        present += sum(1 for row in rows if tuple(row[column] for column in key) in there)
    return TableCopy(table, total, copied, present)


def _value(table: str, column: str, value: Any) -> Any:
    if (table, column) in _BINARY and isinstance(value, str):
        return value.encode()
    if isinstance(value, memoryview):
        return bytes(value)
    return value
