"""The single writer: one connection commits whatever arrived together in one transaction (group commit), on a
thread of its own. A caller's future resolves only after its transaction has committed.

A brief write (one exchange of the proxy's) that finds the thread idle is committed by the event loop itself
when the database's commit waits on nothing but this process (a file at `synchronous = NORMAL`): handing it
to the thread and its outcome back costs more than the commit (two wake-ups, two switches of the
interpreter's lock), and a request waits for both. Writes of any size, and every write to a store whose commit
waits (a sync to disk, a server's round trip), go to the thread; so does each one while the thread holds a
batch, which keeps the commits in the order they were queued, and one that finds the file's write lock held by
another process or a checkpoint under way (the thread waits for those; the loop, serving every other request,
does not).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from reef_contract import EventData, EventName
from reef_daemon.errors import StoreError
from reef_daemon.records import ExchangeFacts
from reef_daemon.store.engines.engine import (
    DB_ERRORS,
    Connection,
    Disconnected,
    Engine,
    SequenceMoved,
    Unanswered,
    WriteLockBusy,
    max_sequence,
)
from reef_daemon.store.engines.schema import migrate

log = logging.getLogger("reef.store")

T = TypeVar("T")
FAILED_MESSAGE = "the record store could not save this; see the daemon log"
UNREACHABLE_MESSAGE = "the record store's database is unreachable ({reason}); nothing was saved, retry shortly"


@dataclass(frozen=True)
class Event:
    """Something that happened, announced on `GET /reef/events` after it is committed."""

    type: EventName
    sequence: int
    scenario: str | None
    data: EventData
    facts: ExchangeFacts | None = field(default=None, compare=False, repr=False)  # in this process only


@dataclass
class WriteContext:
    """What an operation gets inside the group transaction."""

    conn: Connection
    next_sequence: int
    events: list[Event] = field(default_factory=list)
    preceding: int | None = None  # once committed: the highest sequence committed before (Engine.preceding)

    def allocate_sequence(self) -> int:
        """Records and events share one increasing sequence, so `Last-Event-ID` can resume across both."""
        sequence = self.next_sequence
        self.next_sequence += 1
        return sequence

    def announce(self, event: Event) -> None:
        """Publish an event after commit (record events: the record row itself is its durable copy)."""
        self.events.append(event)

    def record_event(self, type: EventName, scenario: str | None, data: EventData) -> Event:
        """Store a non-record event durably (for replay) and publish it after commit."""
        event = Event(type, self.allocate_sequence(), scenario, data)
        self.conn.execute(
            "INSERT INTO events (sequence, type, scenario, created_at, data) VALUES (?,?,?,?,?)",
            (event.sequence, type, scenario, time.time(), json.dumps(data)),
        )
        self.announce(event)
        return event


Operation = Callable[[WriteContext], T]


@dataclass
class _Job(Generic[T]):
    operation: Operation[T]
    future: asyncio.Future[T]
    fallible: bool  # may refuse (bad reference, conflict): runs inside a savepoint so it fails alone
    brief: bool  # small and quick: the loop may commit it itself (the module's docstring)


class _Unguarded(Exception):
    """An operation expected not to fail did; the batch is run again with every operation guarded."""


_STOP = object()


class GroupCommitWriter:
    """Runs write operations on one thread; each batch of waiting operations is one transaction.

    A batch's events are handed to `on_events` on the loop once it committed; or, given `on_commit` (a store
    several daemons share), to it with the highest sequence committed before them, so that the other daemons'
    commits can be announced first."""

    def __init__(
        self,
        engine: Engine,
        on_events: Callable[[list[Event]], None],
        *,
        on_commit: Callable[[list[Event], int | None], None] | None = None,
    ) -> None:
        self._engine = engine
        self._on_events = on_events
        self._on_commit = on_commit
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()  # lists of jobs, then _STOP
        self._waiting: list[_Job[Any]] = []  # queued on the loop in this turn, not yet handed to the thread
        self._loop_commits = engine.commits_without_waiting()  # brief writes may be committed on the loop
        self._with_thread = 0  # batches handed to the thread whose outcomes have not come back to the loop yet
        # Set by the Checkpointer while it copies the WAL into the file, when a commit waits on the file system:
        # the loop then leaves its commits to the thread.
        self.checkpointing = False
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._conn: Connection | None = None
        self._next_sequence = 1
        self.batches = 0
        self.operations = 0
        self._committing = False  # a batch's COMMIT is under way (a failure then leaves its outcome unknown)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._conn = self._engine.connect_writer()
        try:
            migrate(self._conn, self._engine)
            self._next_sequence = max_sequence(self._conn) + 1
        except BaseException:
            self._conn.close()
            self._conn = None
            raise
        self._thread = threading.Thread(target=self._run, name="reef-store-writer", daemon=True)
        self._thread.start()

    async def submit(self, operation: Operation[T], *, fallible: bool = True) -> T:
        """Run `operation` in the next group transaction and return its result once committed.

        `fallible=False` marks an operation that only a broken database can fail (an inference record): it skips
        the savepoint that lets a refused operation fail without sinking its neighbours.
        """
        return await self.enqueue(operation, fallible=fallible)

    def enqueue(self, operation: Operation[T], *, fallible: bool = True, brief: bool = False) -> asyncio.Future[T]:
        """`submit` without the coroutine: the operation is queued now and runs even if nobody awaits the future
        (cancelling the future stops only the waiting, never the write). Call it on the event loop.

        `brief=True` marks an operation that writes one small row and reads nothing of size (the proxy's
        exchange, bounded in bytes): the loop may run it itself (the module's docstring)."""
        if self._loop is None or self._thread is None:
            raise RuntimeError("the store writer is not running")
        future: asyncio.Future[T] = self._loop.create_future()
        self._waiting.append(_Job(operation, future, fallible, brief))
        if len(self._waiting) == 1:
            # The operations queued in one turn of the loop are committed together when the turn ends (the writer
            # could not take the interpreter from the loop sooner): one hand-off per turn, not per operation.
            self._loop.call_soon(self._hand_over)
        return future

    def _hand_over(self) -> None:
        if not self._waiting:
            return
        jobs, self._waiting = self._waiting, []
        if self._loop_commits and not self._with_thread and not self.checkpointing and all(job.brief for job in jobs):
            try:  # the thread holds nothing: no batch queued before these is left
                resolve = self._commit(jobs, wait=False)
            except WriteLockBusy:
                pass  # another process holds the write lock: the thread waits for it, not the loop
            else:
                if self._loop is not None and not self._loop.is_closed():  # closed: nobody waits; it is on disk
                    resolve()
                return
        self._with_thread += 1
        self._queue.put(jobs)

    def _came_back(self, batches: int, resolve: Callable[[], None]) -> None:
        self._with_thread -= batches
        resolve()

    def stop(self) -> None:
        """Finish every queued operation, then close the connection."""
        if self._thread is None:
            return
        self._hand_over()
        self._queue.put(_STOP)
        self._thread.join()
        self._thread = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _run(self) -> None:
        stopping = False
        while not stopping:
            jobs: list[_Job[Any]] = []
            batches = 0
            item = self._queue.get()
            while True:
                if item is _STOP:
                    stopping = True
                else:
                    jobs.extend(item)
                    batches += 1
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if jobs:
                resolve = self._commit(jobs)
                loop = self._loop
                # If the loop closed while we committed, nobody is waiting; the data is safe on disk.
                if loop is not None and not loop.is_closed():
                    with contextlib.suppress(RuntimeError):
                        loop.call_soon_threadsafe(self._came_back, batches, resolve)

    def _connection(self) -> Connection:
        """The write connection; one the database dropped (a restarted server) is opened again."""
        assert self._conn is not None
        if self._engine.lost(self._conn):
            fresh = self._engine.connect_writer()
            with contextlib.suppress(*DB_ERRORS):
                self._conn.close()
            self._conn = fresh
            log.warning("store: reconnected to %s", self._engine.describe())
        return self._conn

    def _commit(self, jobs: list[_Job[Any]], *, wait: bool = True) -> Callable[[], None]:
        """Run a batch in one transaction; returns what hands its outcomes to their callers, on the loop.
        `wait=False`: WriteLockBusy, with nothing written, where another connection holds the write lock."""
        try:
            try:
                context, outcomes = self._run_batch(jobs, wait)
            except Disconnected as exc:
                if self._committing:
                    raise  # the COMMIT itself was cut: whether it landed is unknown, so nothing is run twice
                if isinstance(exc, Unanswered):
                    raise  # a server that does not answer would be waited for as long again
                # The server restarted since this connection last wrote; nothing was committed: run it again.
                context, outcomes = self._run_batch(jobs, wait)
            except SequenceMoved:  # another daemon committed first; nothing of this batch was written
                context, outcomes = self._run_batch(jobs, wait)
        except DB_ERRORS as exc:
            log.error("store commit failed: %s", exc)
            return self._resolver([(job, False, self._failure(exc)) for job in jobs], [], None)
        self._next_sequence = context.next_sequence
        self.batches += 1
        self.operations += len(jobs)
        return self._resolver(outcomes, context.events, context.preceding)

    def _run_batch(self, jobs: list[_Job[Any]], wait: bool) -> tuple[WriteContext, list[tuple[_Job[Any], bool, Any]]]:
        self._committing = False
        conn = self._connection()
        try:
            context, outcomes = self._apply(conn, jobs, guard_all=False, wait=wait)
        except _Unguarded:
            context, outcomes = self._apply(conn, jobs, guard_all=True, wait=wait)
        self._committing = True
        conn.execute("COMMIT")
        context.preceding = self._engine.preceding(conn)
        return context, outcomes

    def _failure(self, exc: Exception) -> StoreError:
        """Roll back what the failed batch left open; what its callers get."""
        conn = self._conn
        with contextlib.suppress(*DB_ERRORS):
            if conn is not None and not self._engine.lost(conn):
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                self._next_sequence = max_sequence(conn) + 1
        if isinstance(exc, Disconnected) or (conn is not None and self._engine.lost(conn)):
            return StoreError(UNREACHABLE_MESSAGE.format(reason=exc))
        return StoreError(FAILED_MESSAGE)

    def _apply(
        self, conn: Connection, jobs: list[_Job[Any]], *, guard_all: bool, wait: bool
    ) -> tuple[WriteContext, list[tuple[_Job[Any], bool, Any]]]:
        """Run every job in one open transaction; a guarded job that raises is rolled back alone."""
        context = WriteContext(conn, self._engine.begin_write(conn, self._next_sequence, wait=wait))
        outcomes: list[tuple[_Job[Any], bool, Any]] = []
        for job in jobs:
            if not (guard_all or job.fallible):
                try:
                    outcomes.append((job, True, job.operation(context)))
                except DB_ERRORS:
                    raise
                except Exception:
                    conn.execute("ROLLBACK")
                    raise _Unguarded from None
                continue
            conn.execute("SAVEPOINT operation")
            mark_sequence, mark_events = context.next_sequence, len(context.events)
            try:
                result = job.operation(context)
            except Exception as exc:  # one refused operation must not sink its neighbours
                conn.execute("ROLLBACK TO operation")
                context.next_sequence = mark_sequence
                del context.events[mark_events:]
                outcomes.append((job, False, _as_refusal(exc)))
            else:
                outcomes.append((job, True, result))
            conn.execute("RELEASE operation")
        return context, outcomes

    def _resolver(
        self, outcomes: list[tuple[_Job[Any], bool, Any]], events: list[Event], preceding: int | None
    ) -> Callable[[], None]:
        def resolve() -> None:
            for job, ok, value in outcomes:
                if job.future.done():
                    continue
                if ok:
                    job.future.set_result(value)
                else:
                    job.future.set_exception(value)
            if events and self._on_commit is not None:
                self._on_commit(events, preceding)
            elif events:
                self._on_events(events)

        return resolve


def _as_refusal(exc: Exception) -> Exception:
    """What a guarded operation's caller gets: its own refusal, or a `StoreError` when the database failed it."""
    if isinstance(exc, DB_ERRORS):
        log.error("store operation failed: %s", exc)
        return StoreError(FAILED_MESSAGE)
    return exc
