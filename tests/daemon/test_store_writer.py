"""The store's group-commit writer, driven directly: what arrives together commits in one transaction; a refused
operation rolls back alone (its savepoint) while its neighbours commit; an operation expected never to fail that
does makes the writer run the batch again with every operation guarded; a database error fails its batch without
wedging the writer; a write lock held elsewhere is waited out; and what the writer acknowledges is on disk. Each
test runs on both engines (SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from reef_contract import CHAT_ROUTE
from reef_daemon.errors import StoreError
from reef_daemon.ids import new_record_id
from reef_daemon.records import InferenceDraft
from reef_daemon.store import Store
from reef_daemon.store.engines.engine import Engine
from reef_daemon.store.engines.opening import open_engine
from reef_daemon.store.engines.writer import Event, GroupCommitWriter, Operation, WriteContext
from reef_daemon.store.records import BRIEF_EXCHANGE_BYTES, RecordStore
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


def on_thread(record_id: str, threads: dict[str, str]) -> Operation[int]:
    """`insert`, noting the name of the thread that ran it."""
    write = insert(record_id)

    def noting(context: WriteContext) -> int:
        threads[record_id] = threading.current_thread().name
        return write(context)

    return noting


@pytest.mark.parametrize("flush", [False, True])
async def test_a_brief_write_is_committed_by_the_loop_only_where_a_commit_waits_for_nothing(
    tmp_path: Path, store_url: str | None, flush: bool
) -> None:
    """A file at synchronous=NORMAL commits into the OS's cache: the loop commits a brief write itself rather than
    wait for two hand-offs. A commit that syncs (store.flush) or crosses to a server would stall every
    connection the loop serves, so those, and every write not marked brief, run on the writer's thread."""
    writing = Writing(open_engine(store_url, tmp_path, flush=flush))
    writing.writer = GroupCommitWriter(writing.engine, writing.on_events)
    writing.writer.start(asyncio.get_running_loop())
    threads: dict[str, str] = {}
    try:
        assert await writing.writer.enqueue(on_thread("brief", threads), brief=True) == 1
        assert writing.stored() == [(1, "brief")]  # on disk, for every other connection, once acknowledged
        assert writing.on_disk_when_announced == [[(1, "brief")]]
        assert await writing.writer.enqueue(on_thread("plain", threads)) == 2
    finally:
        writing.writer.stop()
    here = threading.current_thread().name
    by_loop = writing.engine.name == "sqlite" and not flush
    assert threads == {"brief": here if by_loop else "reef-store-writer", "plain": "reef-store-writer"}


async def test_a_brief_write_queued_while_the_thread_holds_a_batch_commits_after_it(writing: Writing) -> None:
    """Commits keep the order their writes were queued in: a brief write does not overtake a batch the writer's
    thread holds (nor a batch queued behind it); the loop goes on serving while they wait."""
    holding, release = threading.Event(), threading.Event()
    threads: dict[str, str] = {}

    def held(context: WriteContext) -> int:
        holding.set()
        release.wait(60)
        return insert("held")(context)

    first = writing.writer.enqueue(held)
    await eventually(holding.is_set, 60, "the writer's thread to hold a batch")
    queued = writing.writer.enqueue(insert("queued"))
    await asyncio.sleep(0)  # its turn of the loop ends: handed to the thread, behind the held batch
    brief = writing.writer.enqueue(on_thread("brief", threads), brief=True)
    await asyncio.sleep(0.05)  # the loop turns while both wait
    assert not brief.done() and not queued.done()
    release.set()
    assert await asyncio.gather(first, queued, brief) == [1, 2, 3]
    assert writing.stored() == [(1, "held"), (2, "queued"), (3, "brief")]
    assert writing.announced_ids() == ["held", "queued", "brief"]
    assert threads == {"brief": "reef-store-writer"}


async def test_a_brief_write_that_meets_another_process_s_write_lock_waits_on_the_thread_not_the_loop(
    tmp_path: Path,
) -> None:
    """A write lock held from outside reef (a `sqlite3` shell mid-transaction) must not stall the loop, and with
    it every request it serves, for the lock's whole wait: the brief write goes to the writer's thread, which
    waits for the lock and commits once it is let go; the loop turns meanwhile."""
    writing = Writing(open_engine(None, tmp_path))
    writing.writer = GroupCommitWriter(writing.engine, writing.on_events)
    writing.writer.start(asyncio.get_running_loop())
    threads: dict[str, str] = {}
    try:
        with contextlib.closing(writing.engine.connect()) as other:
            writing.engine.begin_write(other, 1)  # the file's write lock, held by another connection
            brief = writing.writer.enqueue(on_thread("brief", threads), brief=True)
            for _ in range(10):
                await asyncio.sleep(0.01)  # the loop goes on turning while the write waits
            assert not brief.done()
            other.execute("ROLLBACK")
            assert await brief == 1
        assert writing.stored() == [(1, "brief")]
        assert writing.announced_ids() == ["brief"]
        assert await writing.writer.enqueue(on_thread("after", threads), brief=True) == 2
    finally:
        writing.writer.stop()
    assert threads == {"brief": "reef-store-writer", "after": threading.current_thread().name}


async def test_only_an_exchange_of_a_bounded_size_is_committed_by_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deriving and storing a large exchange takes milliseconds, which on the loop would hold up every stream it
    relays; such a one is committed on the writer's thread, a small one by the loop."""
    threads: dict[str, str] = {}
    insert_inference = RecordStore._insert_inference

    def noting(self: RecordStore, context: WriteContext, draft: InferenceDraft) -> Any:
        threads[draft.id] = threading.current_thread().name
        return insert_inference(self, context, draft)

    monkeypatch.setattr(RecordStore, "_insert_inference", noting)
    store = Store(tmp_path, lambda _events: None, score_scale={"min": 0.0, "max": 1.0})
    store.open(asyncio.get_running_loop())
    try:
        await store.scenarios.ensure("demo", "counting", "auto")
        ids = {}
        for size in (1000, BRIEF_EXCHANGE_BYTES):
            body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * size}]}).encode()
            ids[size] = new_record_id()
            draft = InferenceDraft(
                id=ids[size], scenario="demo", route=CHAT_ROUTE, created_at=time.time(), model="m", request=body,
                status=200, response=b"{}", stream=False, complete=True, error=None, ttft_ms=None, duration_ms=1.0,
                overhead_ms=None,
            )  # fmt: skip
            await store.records.append_inference(draft)
            assert (await store.records.get(ids[size]))["request"] is not None  # stored, once acknowledged
    finally:
        store.close()
    assert threads == {ids[1000]: threading.current_thread().name, ids[BRIEF_EXCHANGE_BYTES]: "reef-store-writer"}
