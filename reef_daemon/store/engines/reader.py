"""Read-only connections used off the event loop. SQLite's WAL (and PostgreSQL's MVCC) let reads run while the writer
commits."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import time
from collections.abc import Callable
from typing import TypeVar

from reef_daemon.errors import StoreError
from reef_daemon.store.engines.engine import DB_ERRORS, Connection, Disconnected, Engine, Unanswered

T = TypeVar("T")

CLOSE_WAIT_S = 5.0  # how long closing waits for a query still running on a connection


class Reader:
    """A small pool of read-only connections; `run` executes a query function on a worker thread.

    A connection is closed only once no query runs on it (sqlite must not close a connection under a running
    statement); after `close`, a query is refused with a StoreError instead of running on a closed connection."""

    def __init__(self, engine: Engine, size: int = 2) -> None:
        self._engine = engine
        self._pool: queue.SimpleQueue[Connection | None] = queue.SimpleQueue()
        self._size = size
        for _ in range(size):
            self._pool.put(engine.connect(readonly=True))

    async def run(self, query: Callable[[Connection], T]) -> T:
        return await asyncio.to_thread(self.run_blocking, query)

    def run_blocking(self, query: Callable[[Connection], T]) -> T:
        conn = self._pool.get()
        if conn is None:  # closed: pass the word on to the next waiter
            self._pool.put(None)
            raise StoreError("the store is closed (the daemon is stopping)")
        try:
            try:
                if self._engine.lost(conn):
                    conn = self._reopened(conn)
                return query(conn)
            except Unanswered:
                raise  # a server that does not answer would be waited for as long again
            except Disconnected:
                # The server restarted since this connection last ran: a read can run again, on a new one.
                conn = self._reopened(conn)
                return query(conn)
        except Disconnected as exc:
            raise StoreError(f"the record store's database is unreachable ({exc}); retry shortly") from None
        finally:
            self._pool.put(conn)

    def _reopened(self, conn: Connection) -> Connection:
        fresh = self._engine.connect(readonly=True)
        with contextlib.suppress(*DB_ERRORS):
            conn.close()
        return fresh

    def close(self) -> None:
        """Close each connection as its query (if any) ends; one still running after CLOSE_WAIT_S is left to the
        process's exit rather than closed under the query."""
        deadline = time.monotonic() + CLOSE_WAIT_S
        closed = 0
        while closed < self._size:
            try:
                conn = self._pool.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if conn is None:  # closed before
                break
            conn.close()
            closed += 1
        self._pool.put(None)
