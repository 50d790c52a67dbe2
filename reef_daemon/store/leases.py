"""Which daemon runs a scenario's recipe worker: exactly one at a time, whichever daemons share the store.

One daemon on a SQLite file holds every lease. On PostgreSQL a lease is a session-level advisory lock, held on a
connection of its own: when its daemon dies (kill -9 included) the server drops the connection and the lock with
it, and another daemon's worker, trying every LEASE_RETRY_S, takes the scenario over and resumes from the durable
cursor. A lost connection loses every lease; the worker notices before its next step. The step's own commit is the
last fence: a step number already taken, or a record already consumed, is refused by the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

from reef_daemon.store.engine import DB_ERRORS, Connection, Engine, lock_key

LEASE_RETRY_S = 1.0


class Leases:
    """One daemon alone on its store: every lease is its own."""

    shared = False

    async def take(self, scenario: str) -> bool:
        """Take the scenario's lease if nobody holds it; True when this daemon holds it now."""
        return True

    async def holds(self, scenario: str) -> bool:
        """Whether this daemon still holds the scenario's lease."""
        return True

    async def give_back(self, scenario: str) -> None:
        """Let another daemon take the scenario's lease."""

    def close(self) -> None:
        """Give every lease back."""


class AdvisoryLeases(Leases):
    """Leases as PostgreSQL session advisory locks on one connection of this daemon's."""

    shared = True

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._conn: Connection | None = None
        self._held: set[str] = set()
        self._lock = threading.Lock()  # one connection, used from worker threads one at a time

    async def take(self, scenario: str) -> bool:
        return await asyncio.to_thread(self._take, scenario)

    async def holds(self, scenario: str) -> bool:
        return await asyncio.to_thread(self._holds, scenario)

    async def give_back(self, scenario: str) -> None:
        await asyncio.to_thread(self._give_back, scenario)

    def _give_back(self, scenario: str) -> None:
        with self._lock:
            if scenario not in self._held or self._conn is None:
                return
            self._held.discard(scenario)
            with contextlib.suppress(*DB_ERRORS):
                self._conn.execute("SELECT pg_advisory_unlock(?)", (lock_key(f"worker:{scenario}"),))

    def _connection(self) -> Connection:
        if self._conn is None or self._engine.lost(self._conn):
            self._held.clear()  # a dropped connection took its locks with it
            if self._conn is not None:
                with contextlib.suppress(*DB_ERRORS):
                    self._conn.close()
                self._conn = None
            self._conn = self._engine.connect()
        return self._conn

    def _take(self, scenario: str) -> bool:
        with self._lock:
            try:
                conn = self._connection()
                if scenario in self._held:
                    return True
                row = conn.execute("SELECT pg_try_advisory_lock(?) AS taken", (lock_key(f"worker:{scenario}"),))
                if row.fetchone()["taken"]:
                    self._held.add(scenario)
                    return True
                return False
            except DB_ERRORS:
                self._held.clear()
                return False

    def _holds(self, scenario: str) -> bool:
        with self._lock:
            if scenario not in self._held or self._conn is None:
                return False
            try:
                self._conn.execute("SELECT 1").fetchone()  # the connection, and so its locks, are still there
            except DB_ERRORS:
                self._held.clear()
                return False
            return True

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(*DB_ERRORS):
                    self._conn.close()  # the server releases the session's locks
            self._conn = None
            self._held.clear()
