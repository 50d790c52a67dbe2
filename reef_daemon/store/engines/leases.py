"""Which daemon runs a scenario's recipe worker: exactly one at a time, whichever daemons share the store.

One daemon on a SQLite file holds every lease. On PostgreSQL a lease is a session-level advisory lock, held on a
connection of its own: when its daemon dies (kill -9 included) the server drops the connection and the lock with
it, and another daemon's worker, trying every LEASE_RETRY_S, takes the scenario over and resumes from the durable
cursor. A server restart ends every session at once, the holder's perhaps in the middle of a step: the holder takes
its leases back as soon as it is connected again, before any other daemon may (AdvisoryLeases); one it cannot take
back (another daemon took it) is lost, which its worker notices before its next step. The step's own commit is the
last fence: a step number already taken, or a record already consumed, is refused by the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

from reef_daemon.store.engines.engine import DB_ERRORS, Connection, Engine, lock_key

LEASE_RETRY_S = 1.0
KEEP_S = 0.5  # how often a daemon that holds leases checks its lease connection
TAKEOVER_GRACE_S = 5.0  # after a reconnect, how long the leases this daemon did not hold are left to their holders


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
    """Leases as PostgreSQL session advisory locks on one connection of this daemon's.

    A server restart ends every session, and their locks, at once, while a holder may be in the middle of a step.
    The lease must stay with it: a daemon that holds leases checks its connection every KEEP_S and, connected again,
    takes its leases back first; a daemon that had to connect again leaves the leases it did not hold to their
    holders for TAKEOVER_GRACE_S before it tries for them. A holder that is gone leaves its lease to the others
    (kill -9: its session ends with it; it is taken over as before)."""

    shared = True

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._conn: Connection | None = None
        self._connected_before = False
        self._reconnected_at = float("-inf")  # monotonic time of the last reconnect (none yet)
        # The leases this daemon holds, or held when its connection was lost (taken back once it is up again).
        self._held: set[str] = set()
        self._lock = threading.Lock()  # one connection, used from worker threads one at a time
        self._closing = threading.Event()
        self._keeper: threading.Thread | None = None

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
                self._conn.execute("SELECT pg_advisory_unlock(?)", (_key(scenario),))

    def _connection(self) -> Connection:
        """The lease connection; a lost one is opened again and the leases held on it are taken back (a lease
        another daemon took meanwhile is dropped)."""
        if self._conn is not None and not self._engine.lost(self._conn):
            return self._conn
        if self._conn is not None:
            with contextlib.suppress(*DB_ERRORS):
                self._conn.close()
            self._conn = None
        self._conn = conn = self._engine.connect()
        if self._connected_before:
            self._reconnected_at = time.monotonic()
        self._connected_before = True
        for scenario in sorted(self._held):
            if not _try_lock(conn, scenario):
                self._held.discard(scenario)
        return conn

    def _take(self, scenario: str) -> bool:
        with self._lock:
            try:
                conn = self._connection()
                if scenario in self._held:
                    return True
                if time.monotonic() - self._reconnected_at < TAKEOVER_GRACE_S:
                    return False  # its holder, connected again too, takes it back first
                if not _try_lock(conn, scenario):
                    return False
            except DB_ERRORS:
                return False
            self._held.add(scenario)
        self._keep()
        return True

    def _holds(self, scenario: str) -> bool:
        with self._lock:
            if scenario not in self._held:
                return False
            try:
                self._connection().execute("SELECT 1").fetchone()  # the connection, and so its locks, are there
            except DB_ERRORS:
                return False
            return scenario in self._held

    def _keep(self) -> None:
        """Start checking the connection every KEEP_S, while this daemon holds leases."""
        with self._lock:
            if self._keeper is not None:
                return
            self._keeper = threading.Thread(target=self._keep_connected, name="reef-store-leases", daemon=True)
            self._keeper.start()

    def _keep_connected(self) -> None:
        while not self._closing.wait(KEEP_S):
            with self._lock:
                if not self._held:
                    continue
                with contextlib.suppress(*DB_ERRORS):  # a lost connection is opened again at the next check
                    self._connection().execute("SELECT 1").fetchone()

    def close(self) -> None:
        self._closing.set()
        if self._keeper is not None:
            self._keeper.join()
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(*DB_ERRORS):
                    self._conn.close()  # the server releases the session's locks
            self._conn = None
            self._held.clear()


def _key(scenario: str) -> int:
    return lock_key(f"worker:{scenario}")


def _try_lock(conn: Connection, scenario: str) -> bool:
    return bool(conn.execute("SELECT pg_try_advisory_lock(?) AS taken", (_key(scenario),)).fetchone()["taken"])
