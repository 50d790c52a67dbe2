"""Following a shared store: on PostgreSQL, every daemon's commits reach every daemon's `GET /reef/events`.

The database is the event log (records and the `events` table share one sequence, and the daemons' commits are
ordered by the write lock, so a later number never commits before an earlier one). Each group commit sends a
NOTIFY as a wake-up only; this thread LISTENs, and after every wake-up, every POLL_S and every reconnect reads what
was committed after the last sequence it saw, and hands it to the daemon in order: its own commits and the other
daemons' alike, each once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable

from reef_daemon.store.engine import DB_ERRORS, Connection, Engine, max_sequence
from reef_daemon.store.events import EventLog
from reef_daemon.store.writer import Event

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
        self.last = 0

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
                conn.execute("LISTEN reef_store")  # postgres.NOTICE_CHANNEL
                while not self._stop.is_set():
                    self._catch_up(conn)
                    self._engine.wait_for_notice(conn, POLL_S)
            except DB_ERRORS as exc:
                log.warning("store: following %s failed (%s); retrying", self._engine.describe(), exc)
                self._stop.wait(RECONNECT_S)
            finally:
                if conn is not None:
                    with contextlib.suppress(*DB_ERRORS):
                        conn.close()

    def _catch_up(self, conn: Connection) -> None:
        while True:
            events = EventLog.read_after(conn, self.last, None, BATCH)
            if not events:
                return
            self.last = events[-1].sequence
            self._deliver(events)
            if len(events) < BATCH:
                return

    def _deliver(self, events: list[Event]) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody is listening
            loop.call_soon_threadsafe(self._on_events, events)


def last_sequence(conn: Connection) -> int:
    """Where a follower starts: what is committed now was announced before (or is replayed by Last-Event-ID)."""
    return max_sequence(conn)
