"""The two database engines the store runs on, behind one small interface.

SQLite (a file under the state directory) is the default for one daemon; PostgreSQL (`store.url`) is the store a
team's several daemons share. The queries are written once, in the SQL both speak (`?` placeholders,
`INSERT … ON CONFLICT`, `CASE` rather than two-argument `max`); an engine supplies only what differs: how to connect,
how a write transaction begins (PostgreSQL also serializes the daemons' sequence allocation there), where the
schema version lives, and the column types of the migrations' DDL.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

DATABASE_NAME = "reef.sqlite3"
WAL_BOUND_PAGES = 8000  # ~32 MiB of 4 KiB pages
LOCK_WAIT_S = 10.0  # how long a statement waits for another connection's lock before the database says busy
ANSWER_WAIT_S = 10.0  # how long a statement waits for a database server's answer (store.timeout-s)


class DatabaseError(Exception):
    """A PostgreSQL failure, in the words of the server (SQLite's are `sqlite3.Error`)."""


class IntegrityViolation(DatabaseError):
    """A constraint refused a write (a duplicate key)."""


class Disconnected(DatabaseError):
    """The connection to PostgreSQL is gone (the server stopped, the network broke)."""


class Unanswered(Disconnected):
    """The server did not answer in time (stopped, or cut off without a word): the connection is given up, and the
    operation is not run again on a new one (it would wait as long again)."""


class SequenceMoved(DatabaseError):
    """Another daemon committed since this writer's last commit, so the sequence it expected is taken: the
    transaction failed before anything was written, and the writer runs the batch again (PostgreSQL)."""


class WriteLockBusy(Exception):
    """Another connection (another process: a `sqlite3` shell mid-transaction) holds the file's write lock, and
    the write asked not to wait for it; nothing was written."""


class StoreUnavailable(RuntimeError):
    """The store cannot be opened: its database is unreachable, or newer than this reef."""


# What a store operation catches as "the database failed", whichever engine runs.
DB_ERRORS: tuple[type[Exception], ...] = (sqlite3.Error, DatabaseError)
INTEGRITY_ERRORS: tuple[type[Exception], ...] = (sqlite3.IntegrityError, IntegrityViolation)


class Columns(Protocol):
    """A row's values by column name: a stored row (either engine's), or a dict a writer built before inserting it."""

    def __getitem__(self, name: str, /) -> Any: ...


class Cursor(Protocol):
    """The part of a DB-API cursor the store uses; rows are read by column name (and by position)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def close(self) -> None: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """The part of a connection the store uses: an `sqlite3.Connection`, or the PostgreSQL one in postgres.py."""

    @property
    def in_transaction(self) -> bool: ...

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor: ...

    def close(self) -> None: ...


class Engine:
    """SQLite: one file in WAL mode. The base of every engine."""

    name = "sqlite"
    shared = False  # whether several daemons may use the store at once

    def __init__(self, path: str, *, flush: bool = False) -> None:
        self.path = path
        self.flush = flush  # a commit returns once it is on disk (else once the database holds it)

    def describe(self) -> str:
        """Where the store is, for status and logs (no secret in it)."""
        return self.path

    def connect(self, *, readonly: bool = False) -> Connection:
        """Open a connection with the settings every connection needs; its rows are read by column name."""
        if readonly:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False, isolation_level=None)
        else:
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(LOCK_WAIT_S * 1000)}")
        if not readonly:
            conn.execute("PRAGMA journal_mode = WAL")
            # WAL + NORMAL: a commit survives a crash of this process (the OS holds the bytes); only power loss
            # before the next checkpoint can take the newest commits. FULL (`store.flush`) syncs the WAL at
            # each commit: power loss takes nothing acknowledged either.
            conn.execute(f"PRAGMA synchronous = {'FULL' if self.flush else 'NORMAL'}")
            # Checkpoints run on the Checkpointer's thread, not inside a commit a request is waiting for; it starts
            # the WAL over long before this many pages. Past them (a Checkpointer refused for long), the writer
            # checkpoints itself, cheaply (most pages are copied already), to bound the WAL.
            conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_BOUND_PAGES}")
        return conn

    def connect_writer(self) -> Connection:
        """The store writer's connection. It never waits inside SQLite for another connection's lock: its one wait,
        for the write lock, is `begin_write`'s, which a commit on the event loop asks to refuse at once."""
        conn = self.connect()
        conn.execute("PRAGMA busy_timeout = 0")
        return conn

    def commits_without_waiting(self) -> bool:
        """Whether a commit returns without waiting on anything but this process: a file at `synchronous = NORMAL`
        (the OS takes the WAL's pages; nothing is synced, and no other process writes it). Not with `flush`
        (each commit syncs) nor for a server (a round trip)."""
        return not self.flush

    def begin_write(self, conn: Connection, next_sequence: int, *, wait: bool = True) -> int:
        """Open a write transaction; returns the next free sequence. One writer per file: the writer's count holds.
        A write lock another process holds is waited for up to LOCK_WAIT_S (then the database's busy error);
        with `wait=False`, WriteLockBusy at once."""
        _begin_immediate(conn, LOCK_WAIT_S if wait else 0.0)
        return next_sequence

    def preceding(self, conn: Connection) -> int | None:
        """After a write transaction committed: the highest sequence any daemon had committed before it, all of
        which a shared store's follower announces before this transaction's events; None where this writer is
        the only one (a file)."""
        return None

    def begin_migration(self, conn: Connection) -> None:
        """Open the transaction the migrations run in (one daemon at a time)."""
        _begin_immediate(conn, LOCK_WAIT_S)

    def schema_version(self, conn: Connection) -> int:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])

    def set_schema_version(self, conn: Connection, version: int) -> None:
        conn.execute(f"PRAGMA user_version = {int(version)}")

    def ddl(self, statement: str) -> str:
        """A migration's DDL in this engine's types (the migrations are written in SQLite's)."""
        return statement

    def prepare(self, conn: Connection) -> None:
        """Run before the migrations, inside their transaction: what the engine needs to speak the shared SQL."""

    def wait_for_notice(self, conn: Connection, timeout: float) -> bool:
        """Wait up to `timeout` for another daemon's commit to be announced (a shared engine; see follower.py);
        whether one was."""
        time.sleep(timeout)
        return False

    def lost(self, conn: Connection) -> bool:
        """Whether this connection can no longer be used (it is reopened); a file never goes away."""
        return False


def lock_key(name: str) -> int:
    """A stable PostgreSQL advisory-lock key (a signed 64-bit number) for a name."""
    return int.from_bytes(hashlib.sha256(f"reef:{name}".encode()).digest()[:8], "big", signed=True)


def max_sequence(conn: Connection) -> int:
    """The highest sequence in use: records and events share one increasing sequence."""
    row = conn.execute(
        "SELECT coalesce((SELECT max(sequence) FROM records), 0) AS records,"
        " coalesce((SELECT max(sequence) FROM events), 0) AS events"
    ).fetchone()
    return max(int(row["records"]), int(row["events"]))


def _begin_immediate(conn: Connection, wait_s: float) -> None:
    """BEGIN IMMEDIATE, retried while another connection holds the write lock, for up to `wait_s` (pausing 1 ms,
    doubling to 50 ms, as SQLite's own busy handler does); with no wait, WriteLockBusy at the first refusal."""
    deadline = time.monotonic() + wait_s
    pause = 0.001
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                raise
            if wait_s <= 0:
                raise WriteLockBusy(str(exc)) from exc
            if time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
