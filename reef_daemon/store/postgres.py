"""PostgreSQL as the store's engine: a team's daemons share one database (`store.url postgresql://…`).

The store's SQL is written once with `?` placeholders; a connection here turns them into psycopg's and maps the
driver's errors to the store's (engine.DatabaseError and kin). What PostgreSQL needs to read the same SQL is made
before the migrations: `json_extract(text, '$.key')`, as SQLite has it. Each group commit takes a transaction-level
advisory lock before it allocates sequences, so the daemons' commits are ordered as one sequence and a reader that
follows it (events, recipe workers) never sees a later number commit before an earlier one.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
import psycopg.errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus

from reef_daemon.store.engine import (
    Connection,
    Cursor,
    DatabaseError,
    Disconnected,
    Engine,
    IntegrityViolation,
    lock_key,
)

CONNECT_TIMEOUT_S = 5


WRITE_LOCK = lock_key("store-write")
MIGRATE_LOCK = lock_key("store-migrate")
NOTICE_CHANNEL = "reef_store"  # what follower.py LISTENs on
_BEGIN_WRITE = (  # made of constants
    f"BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK}), pg_notify('{NOTICE_CHANNEL}', '');"  # noqa: S608
    " SELECT coalesce((SELECT max(sequence) FROM records), 0) AS records,"
    " coalesce((SELECT max(sequence) FROM events), 0) AS events"
)

_PREPARE = (
    "CREATE TABLE IF NOT EXISTS reef_schema (version BIGINT NOT NULL)",
    "INSERT INTO reef_schema (version) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM reef_schema)",
    # SQLite's json_extract for the one form the store uses, a top-level key: '$.key'. IMMUTABLE, so an index
    # over it can be built (migration 7/8).
    "CREATE OR REPLACE FUNCTION json_extract(doc text, path text) RETURNS text LANGUAGE sql IMMUTABLE"
    " PARALLEL SAFE AS $$ SELECT (doc::jsonb) #>> string_to_array(substr(path, 3), '.') $$",
)
_DDL_TYPES = (("INTEGER", "BIGINT"), ("REAL", "DOUBLE PRECISION"), ("BLOB", "BYTEA"), ("WITHOUT ROWID", ""))


@functools.lru_cache(maxsize=1024)
def translate(sql: str, with_parameters: bool) -> str:
    """The store's SQL for psycopg: `?` becomes `%s` (and a literal `%` is doubled) outside quoted strings."""
    if sql == "BEGIN IMMEDIATE":  # SQLite's write transaction; PostgreSQL locks row by row (and see begin_write)
        return "BEGIN"
    if not with_parameters:
        return sql
    out: list[str] = []
    quoted = False
    for char in sql:
        if char == "'":
            quoted = not quoted
            out.append(char)
        elif char == "%":
            out.append("%%")
        elif char == "?" and not quoted:
            out.append("%s")
        else:
            out.append(char)
    return "".join(out)


class Row(tuple[Any, ...]):
    """A row read by column name or position, as `sqlite3.Row` is."""

    _index: dict[str, int]

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


def _row_factory(cursor: Any) -> Any:
    names = [column.name for column in cursor.description or ()]
    index = {name: position for position, name in enumerate(names)}

    def make(values: Sequence[Any]) -> Row:
        row = Row(values)
        row._index = index
        return row

    return make


def _store_error(exc: psycopg.Error) -> DatabaseError:
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, psycopg.errors.IntegrityError):
        return IntegrityViolation(detail)
    lost = (psycopg.OperationalError, psycopg.InterfaceError, psycopg.errors.AdminShutdown)
    if isinstance(exc, lost):
        return Disconnected(detail)
    return DatabaseError(detail)


class PostgresConnection:
    """One psycopg connection in autocommit mode; the store opens its transactions with `BEGIN` itself."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    @property
    def in_transaction(self) -> bool:
        return self._conn.info.transaction_status != TransactionStatus.IDLE

    @property
    def raw(self) -> psycopg.Connection[Any]:
        return self._conn

    @property
    def lost(self) -> bool:
        return self._conn.closed or self._conn.broken

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        try:
            if parameters:
                return self._conn.execute(translate(sql, True), tuple(parameters))
            return self._conn.execute(translate(sql, False))
        except psycopg.Error as exc:
            raise _store_error(exc) from None

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor:
        cursor = self._conn.cursor()
        batch = [tuple(values) for values in parameters]
        if batch:
            try:
                cursor.executemany(translate(sql, True), batch)
            except psycopg.Error as exc:
                raise _store_error(exc) from None
        return cursor

    def close(self) -> None:
        self._conn.close()


class PostgresEngine(Engine):
    """A PostgreSQL database (14 or newer) several daemons share."""

    name = "postgresql"
    shared = True

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url

    def describe(self) -> str:
        try:
            parts = conninfo_to_dict(self.url)
        except psycopg.Error:
            return "postgresql://(unparsable URL)"
        user = f"{parts['user']}@" if parts.get("user") else ""
        host = parts.get("host") or "localhost"
        port = f":{parts['port']}" if parts.get("port") else ""
        return f"postgresql://{user}{host}{port}/{parts.get('dbname') or ''}"

    def connect(self, *, readonly: bool = False) -> Connection:
        options = "-c default_transaction_read_only=on" if readonly else ""
        try:
            conn = psycopg.connect(
                self.url,
                autocommit=True,
                row_factory=_row_factory,
                connect_timeout=CONNECT_TIMEOUT_S,
                application_name="reef",
                options=options,
            )
        except psycopg.Error as exc:
            raise Disconnected(f"cannot reach {self.describe()}: {_store_error(exc)}") from None
        return PostgresConnection(conn)

    def begin_write(self, conn: Connection, next_sequence: int) -> int:
        # Every daemon's writer takes this lock for its transaction: commits (and their sequences) are ordered.
        # One round trip: the statements of a string without parameters run in order, each with a snapshot of its
        # own, so the highest sequence is read after the lock is held. The NOTIFY wakes the daemons' followers
        # once this commits (follower.py); it says nothing by itself.
        assert isinstance(conn, PostgresConnection)
        try:
            cursor = conn.raw.execute(_BEGIN_WRITE)
            while cursor.nextset():  # BEGIN, the lock, then the highest sequence
                pass
            row = cursor.fetchone()
        except psycopg.Error as exc:
            raise _store_error(exc) from None
        assert row is not None
        return max(int(row["records"]), int(row["events"])) + 1

    def begin_migration(self, conn: Connection) -> None:
        conn.execute("BEGIN")
        conn.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATE_LOCK,))

    def prepare(self, conn: Connection) -> None:
        for statement in _PREPARE:
            conn.execute(statement)

    def schema_version(self, conn: Connection) -> int:
        return int(conn.execute("SELECT version FROM reef_schema").fetchone()["version"])

    def set_schema_version(self, conn: Connection, version: int) -> None:
        conn.execute("UPDATE reef_schema SET version = ?", (version,))

    def ddl(self, statement: str) -> str:
        for sqlite_type, postgres_type in _DDL_TYPES:
            statement = re.sub(rf"\b{sqlite_type}\b", postgres_type, statement)
        return statement

    def wait_for_notice(self, conn: Connection, timeout: float) -> None:
        assert isinstance(conn, PostgresConnection)
        try:
            for _notice in conn.raw.notifies(timeout=timeout, stop_after=1):
                pass
        except psycopg.Error as exc:
            raise _store_error(exc) from None

    def lost(self, conn: Connection) -> bool:
        return isinstance(conn, PostgresConnection) and conn.lost
