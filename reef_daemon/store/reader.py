"""Read-only connections used off the event loop. WAL lets reads run while the writer commits."""

from __future__ import annotations

import asyncio
import queue
import sqlite3
from collections.abc import Callable
from typing import TypeVar

from reef_daemon.store.schema import connect

T = TypeVar("T")


class Reader:
    """A small pool of read-only connections; `run` executes a query function on a worker thread."""

    def __init__(self, path: str, size: int = 2) -> None:
        self._pool: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self._connections = [connect(path, readonly=True) for _ in range(size)]
        for conn in self._connections:
            self._pool.put(conn)

    async def run(self, query: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.to_thread(self.run_blocking, query)

    def run_blocking(self, query: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._pool.get()
        try:
            return query(conn)
        finally:
            self._pool.put(conn)

    def close(self) -> None:
        for conn in self._connections:
            conn.close()
