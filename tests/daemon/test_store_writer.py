"""The store's group-commit writer, driven directly: what arrives together commits in one transaction; a refused
operation rolls back alone (its savepoint) while its neighbours commit; an operation expected never to fail that
does makes the writer run the batch again with every operation guarded; a database error fails its batch without
wedging the writer; a write lock held elsewhere is waited out; and what the writer acknowledges is on disk. Each
test runs on both engines (SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from reef_daemon.errors import StoreError
from reef_daemon.store.engine import Engine, open_engine
from reef_daemon.store.writer import Event, GroupCommitWriter, Operation, WriteContext
from tests.support.waiting import eventually


def stored(engine: Engine) -> list[tuple[int, str]]:
    """(sequence, id) of every record on disk, read through a connection of its own."""
    db = engine.connect()
    try:
        rows = db.execute("SELECT sequence, id FROM records ORDER BY sequence").fetchall()
        return [(int(row["sequence"]), str(row["id"])) for row in rows]
    finally:
        db.close()


@dataclass
class Writing:
    """A running writer on a fresh database, the events it announced, and what was on disk at each announcement."""

    engine: Engine
    writer: GroupCommitWriter = field(init=False)
    announced: list[Event] = field(default_factory=list)
    on_disk_when_announced: list[list[tuple[int, str]]] = field(default_factory=list)

    def on_events(self, events: list[Event]) -> None:
        self.announced.extend(events)
        self.on_disk_when_announced.append(stored(self.engine))

    def stored(self) -> list[tuple[int, str]]:
        return stored(self.engine)

    def announced_ids(self) -> list[str]:
        return [str(event.data["id"]) for event in self.announced]


@pytest.fixture
async def writing(tmp_path: Path, store_url: str | None) -> AsyncIterator[Writing]:
    writing = Writing(open_engine(store_url, tmp_path))
    writing.writer = GroupCommitWriter(writing.engine, writing.on_events)
    writing.writer.start(asyncio.get_running_loop())
    yield writing
    writing.writer.stop()


def insert(record_id: str, then_fail: Exception | None = None) -> Operation[int]:
    """Store a record and announce it; returns its sequence, or raises `then_fail` after writing."""

    def write(context: WriteContext) -> int:
        sequence = context.allocate_sequence()
        context.conn.execute(
            "INSERT INTO records (sequence, id, scenario, type, created_at) VALUES (?, ?, 'demo', 'report', 0)",
            (sequence, record_id),
        )
        context.announce(Event("record", sequence, "demo", {"id": record_id}))
        if then_fail is not None:
            raise then_fail
        return sequence

    return write


def broken_sql(context: WriteContext) -> None:
    """A database error in an operation expected never to fail, as a schema the code does not match would give."""
    context.conn.execute("INSERT INTO no_such_table VALUES (1)")


async def in_one_batch(writer: GroupCommitWriter, *operations: tuple[Operation[Any], bool]) -> list[Any]:
    """Submit (operation, fallible) pairs so that the writer takes them as one batch: it is held inside a batch of
    its own until all of them are queued. Returns each operation's result or exception, in order."""
    holding, release = threading.Event(), threading.Event()

    def hold(context: WriteContext) -> None:
        holding.set()
        release.wait(60)

    held = asyncio.ensure_future(writer.submit(hold))
    await eventually(holding.is_set, 60, "the writer to be held in a batch")

    async def let_go() -> None:
        release.set()  # gather starts this after every submission before it has queued its operation

    submissions = [writer.submit(operation, fallible=fallible) for operation, fallible in operations]
    *outcomes, _ = await asyncio.gather(*submissions, let_go(), return_exceptions=True)
    await held
    return outcomes


async def test_a_refused_operation_rolls_back_alone_and_its_neighbours_commit(writing: Writing) -> None:
    batches = writing.writer.batches
    refusal = ValueError("unknown reference")
    outcomes = await in_one_batch(
        writing.writer,
        (insert("a"), True),
        (insert("b", then_fail=refusal), True),  # wrote a row, then refused: the row goes
        (insert("a"), True),  # a conflict the database refuses
        (insert("c"), True),
    )
    first, refused, conflict, last = outcomes
    assert refused is refusal
    assert isinstance(conflict, StoreError)  # the database refused it: a 503 for its caller alone
    assert (first, last) == (1, 2)  # the sequences the refused ones took are given out again
    assert writing.writer.batches == batches + 2  # the holding batch, then all four together
    assert writing.stored() == [(1, "a"), (2, "c")]
    assert writing.announced_ids() == ["a", "c"]


async def test_an_unguarded_operation_that_fails_makes_the_batch_run_again_guarded(writing: Writing) -> None:
    refusal = ValueError("a bug in an operation expected never to fail")
    outcomes = await in_one_batch(
        writing.writer,
        (insert("a"), False),
        (insert("b", then_fail=refusal), False),
        (insert("c"), False),
    )
    assert outcomes == [1, refusal, 2]
    assert writing.stored() == [(1, "a"), (2, "c")]  # the first run was rolled back: nothing twice
    assert writing.announced_ids() == ["a", "c"]


async def test_a_database_error_fails_its_batch_and_the_writer_goes_on(writing: Writing) -> None:
    batches = writing.writer.batches
    outcomes = await in_one_batch(writing.writer, (insert("a"), False), (broken_sql, False))
    for outcome in outcomes:
        assert isinstance(outcome, Exception) and "the record store could not" in str(outcome), outcome
    assert writing.writer.batches == batches + 1  # only the holding batch committed
    assert writing.stored() == [] and writing.announced == []

    assert await writing.writer.submit(insert("b")) == 1  # no sequence was used up by the failed batch
    assert writing.stored() == [(1, "b")]
    assert writing.announced_ids() == ["b"]


async def test_a_statement_a_failed_batch_skipped_runs_in_the_next(writing: Writing) -> None:
    """On PostgreSQL a batch's statements are prepared in its pipeline; those after the one that failed were
    skipped, their Parse too, and the next batch that sends them prepares them again."""
    for attempt in range(2):  # the second time, the statements the first prepared are reused
        outcomes = await in_one_batch(writing.writer, (broken_sql, False), (insert(f"skipped-{attempt}"), False))
        assert all(isinstance(outcome, StoreError) for outcome in outcomes), outcomes
        assert await writing.writer.submit(insert(f"next-{attempt}")) == attempt + 1
    assert writing.stored() == [(1, "next-0"), (2, "next-1")]
    assert writing.announced_ids() == ["next-0", "next-1"]


async def test_a_write_waits_out_a_lock_another_connection_holds(writing: Writing) -> None:
    with contextlib.closing(writing.engine.connect()) as other:
        writing.engine.begin_write(other, 1)  # the store's write lock, as another daemon's writer would hold it

        async def release_once_taken() -> None:
            # gather starts this after the write is queued. Off the queue, the write is at or in the writer's BEGIN.
            await eventually(writing.writer._queue.empty, 60, "the writer to take the write")
            other.execute("ROLLBACK")

        sequence, _ = await asyncio.gather(writing.writer.submit(insert("a")), release_once_taken())
    assert sequence == 1
    assert writing.stored() == [(1, "a")]


async def test_an_acknowledged_write_is_on_disk_and_announced_only_once_there(writing: Writing) -> None:
    sequence = await writing.writer.submit(insert("a"))
    assert writing.stored() == [(sequence, "a")]  # read by another connection while the writer runs on
    assert writing.on_disk_when_announced == [[(sequence, "a")]]


async def test_writers_of_two_daemons_on_one_database_take_turns_in_one_sequence(
    tmp_path: Path, postgres_url: str
) -> None:
    # Each writer sends the number after its own last commit unconfirmed; when the other daemon committed in
    # between, the database refuses that number before anything is written and the batch runs again.
    first = Writing(open_engine(postgres_url, tmp_path / "one"))
    second = Writing(open_engine(postgres_url, tmp_path / "two"))
    for writing in (first, second):
        writing.writer = GroupCommitWriter(writing.engine, writing.on_events)
        writing.writer.start(asyncio.get_running_loop())
    try:
        assert await first.writer.submit(insert("a"), fallible=False) == 1
        assert await first.writer.submit(insert("b"), fallible=False) == 2
        assert await second.writer.submit(insert("c"), fallible=False) == 3
        assert await first.writer.submit(insert("d"), fallible=False) == 4  # an operation that cannot refuse
        assert await second.writer.submit(insert("e")) == 5  # one that may refuse (inside a savepoint)
        assert await second.writer.submit(insert("f")) == 6
        assert await first.writer.submit(insert("g")) == 7
        refusal = ValueError("unknown reference")
        outcomes = await asyncio.gather(
            second.writer.submit(insert("h"), fallible=False),
            second.writer.submit(insert("i", then_fail=refusal)),
            second.writer.submit(insert("a")),  # the database refuses it: an id in use
            return_exceptions=True,
        )
        assert outcomes[0] == 8 and outcomes[1] is refusal and isinstance(outcomes[2], StoreError)
        assert await first.writer.submit(insert("j"), fallible=False) == 9
    finally:
        first.writer.stop()
        second.writer.stop()
    assert first.stored() == [(n, record_id) for n, record_id in enumerate("abcdefghj", start=1)]


@pytest.mark.parametrize("flush", [False, True])
async def test_a_commit_waits_for_the_disk_only_with_store_flush(
    tmp_path: Path, store_url: str | None, flush: bool
) -> None:
    # Without store.flush a commit returns once the database holds it (SQLite: the OS; PostgreSQL: the server),
    # which no crash of the daemon loses; with it, once it is on disk (PostgreSQL: as the server is set, on).
    engine = open_engine(store_url, tmp_path, flush=flush)
    writer = GroupCommitWriter(engine, lambda _events: None)
    writer.start(asyncio.get_running_loop())

    def commit_wait(context: WriteContext) -> str:
        if engine.name == "sqlite":
            return {1: "normal", 2: "full"}[int(context.conn.execute("PRAGMA synchronous").fetchone()[0])]
        return str(context.conn.execute("SHOW synchronous_commit").fetchone()[0])

    try:
        wait = await writer.submit(commit_wait)
    finally:
        writer.stop()
    expected = {("sqlite", False): "normal", ("sqlite", True): "full", ("postgresql", False): "off"}
    assert wait == expected.get((engine.name, flush), "on")


async def test_operations_queued_in_one_turn_of_the_loop_commit_together(writing: Writing) -> None:
    batches = writing.writer.batches
    futures = [writing.writer.enqueue(insert(name)) for name in ("a", "b", "c")]  # no await between them
    assert await asyncio.gather(*futures) == [1, 2, 3]
    assert writing.writer.batches == batches + 1
    assert writing.stored() == [(1, "a"), (2, "b"), (3, "c")]


async def test_a_write_whose_waiter_was_cancelled_still_commits(writing: Writing) -> None:
    """A client that leaves cancels its wait for the receipt; the record it queued is written all the same."""
    left = writing.writer.enqueue(insert("left"))
    left.cancel()
    assert await writing.writer.submit(insert("next")) == 2
    assert writing.stored() == [(1, "left"), (2, "next")]
    assert writing.announced_ids() == ["left", "next"]


async def test_large_and_small_bodies_committed_together_are_stored_as_sent(writing: Writing) -> None:
    """Bodies of every size, with quotes, backslashes, `%` and `?` in them, committed in one batch (on PostgreSQL
    one pipeline, the bytes sent in binary), are stored byte for byte."""
    bodies = {"small": b"\x00'\\%?" * 10, "large": bytes(range(256)) * 400, "text": ("é'%?" * 2000).encode()}

    def store(record_id: str) -> Operation[int]:
        def write(context: WriteContext) -> int:
            sequence = context.allocate_sequence()
            context.conn.execute(
                "INSERT INTO records (sequence, id, scenario, type, created_at, request) VALUES (?, ?, 'demo',"
                " 'inference', 0, ?)",
                (sequence, record_id, bodies[record_id]),
            )
            return sequence

        return write

    await in_one_batch(writing.writer, *((store(name), False) for name in bodies))
    db = writing.engine.connect()
    try:
        stored_bodies = {row["id"]: bytes(row["request"]) for row in db.execute("SELECT id, request FROM records")}
    finally:
        db.close()
    assert stored_bodies == bodies
