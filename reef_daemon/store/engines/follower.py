"""Following a shared store: on PostgreSQL, every daemon's commits reach every daemon's `GET /reef/events`.

The database is the event log (records and the `events` table share one sequence, and the daemons' commits are
ordered by the write lock, so a later number never commits before an earlier one). A daemon's writer hands its own
commits' events over as they commit, with the highest sequence committed before them (`Engine.preceding`); the
other daemons' commits are read back here. Each group commit sends a NOTIFY naming its daemon (none while no other
daemon's follower is connected); this thread LISTENs, lets its own daemon's pass, and after another daemon's, every
POLL_S and every reconnect reads what was committed after the last sequence announced. On the loop the two are
merged in sequence order: a batch of this daemon's waits until every commit before it is announced, and every
event is announced once.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
from collections.abc import Callable

from reef_daemon.store.engines.engine import DB_ERRORS, Connection, Engine, max_sequence
from reef_daemon.store.engines.writer import Event
from reef_daemon.store.events import EventLog

log = logging.getLogger("reef.store")

POLL_S = 0.5  # also the longest a missed wake-up delays an event
RECONNECT_S = 1.0
BATCH = 1000


class EventFollower:
    def __init__(self, engine: Engine, on_events: Callable[[list[Event]], None]) -> None:
        self._engine = engine
        self._on_events = on_events
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.last = 0  # every sequence up to this one that was committed is announced (set on the loop)
        self._read = 0  # the last sequence this thread read back
        self._waiting: collections.deque[tuple[int | None, list[Event]]] = collections.deque()  # this daemon's

    def start(self, loop: asyncio.AbstractEventLoop, after: int) -> None:
        self._loop = loop
        self.last = after
        self._thread = threading.Thread(target=self._run, name="reef-store-follower", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            conn: Connection | None = None
            try:
                conn = self._engine.connect()
                conn.execute("SET application_name = 'reef-follower'")  # postgres.FOLLOWER_NAME: daemons count them
                conn.execute("LISTEN reef_store")  # postgres.NOTICE_CHANNEL
                self._catch_up(conn)
                while not self._stop.is_set():
                    self._engine.wait_for_notice(conn, POLL_S)  # after a notice, or now and then all the same
                    self._catch_up(conn)
            except DB_ERRORS as exc:
                log.warning("store: following %s failed (%s); retrying", self._engine.describe(), exc)
                self._stop.wait(RECONNECT_S)
            finally:
                if conn is not None:
                    with contextlib.suppress(*DB_ERRORS):
                        conn.close()

    def _catch_up(self, conn: Connection) -> None:
        while True:
            # `last` is read off the loop: at worst too low, and what is announced already is skipped there.
            events = EventLog.read_after(conn, max(self._read, self.last), None, BATCH)
            if not events:
                return
            self._read = events[-1].sequence
            self._deliver(events)
            if len(events) < BATCH:
                return

    def _deliver(self, events: list[Event]) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody is listening
            loop.call_soon_threadsafe(self._read_back, events)

    def committed(self, events: list[Event], preceding: int | None) -> None:
        """This daemon's commit (on the loop, from its writer): announced now when everything committed before it
        is, else once the other daemons' commits before it are read back (None: unknown, read back with them)."""
        self._waiting.append((preceding, events))
        self._release()

    def _read_back(self, events: list[Event]) -> None:
        self._announce(events)
        self._release()

    def _release(self) -> None:
        while self._waiting:
            preceding, events = self._waiting[0]
            if max(event.sequence for event in events) <= self.last:  # read back already
                self._waiting.popleft()
            elif preceding is not None and preceding <= self.last:
                self._waiting.popleft()
                self._announce(events)
            else:
                return

    def _announce(self, events: list[Event]) -> None:
        fresh = [event for event in events if event.sequence > self.last]
        if fresh:
            self.last = max(self.last, *(event.sequence for event in fresh))
            self._on_events(fresh)


def last_sequence(conn: Connection) -> int:
    """Where a follower starts: what is committed now was announced before (or is replayed by Last-Event-ID)."""
    return max_sequence(conn)
