"""PostgreSQL as the store's engine: a team's daemons share one database (`store.url postgresql://…`).

The store's SQL is written once with `?` placeholders; a connection here turns them into psycopg's and maps the
driver's errors to the store's (engine.DatabaseError and kin). What PostgreSQL needs to read the same SQL is made
before the migrations: `json_extract(text, '$.key')`, as SQLite has it, and `reef_begin_write`, which opens a group
commit. Each group commit takes a transaction-level advisory lock before it allocates sequences, so the daemons'
commits are ordered as one sequence and a reader that follows it (events, recipe workers) never sees a later number
commit before an earlier one.

A group commit is sent as one pipeline: the statements whose results nobody reads yet (an inference record's
INSERT) are held and go out together with the COMMIT, each as a named prepared statement (Parse once per
connection, then Bind and Execute, the parameters as psycopg dumps them: bytes in binary), and one Sync; so a batch
costs one round trip to the server, which neither parses nor plans a statement it has seen. This drives libpq
directly (psycopg's pipeline mode spends ~0.3 ms more a commit in Python, one simple query with the parameters
bound as literals makes the server parse and plan everything each time). A statement is known to be prepared once
its Parse is confirmed: a Parse that a failed pipeline skipped is sent again. The writer's
sequence is sent as a guess (the number after its own last commit) that the server checks under the lock; when
another daemon committed in between, the check fails the transaction before anything is written and the batch runs
again with the number read under the lock (`SequenceMoved`). A statement of an operation that may refuse (inside a
savepoint) is confirmed at once, so its failure is its own, as it is on SQLite.

Commit wait (`flush`): by default a write transaction commits with `synchronous_commit = off`: the COMMIT returns
once the server holds the transaction (visible to every daemon, in its WAL buffers), not after the WAL is flushed to
disk. A crash of any daemon loses nothing it acknowledged, as with SQLite's WAL at `synchronous = NORMAL`; a crash of
the PostgreSQL server itself (or its machine) can lose the last ~3 x wal_writer_delay (0.6 s by default) of
commits, the database staying consistent, as power loss can lose SQLite's newest commits. `flush` keeps the
server's own setting (on unless the DBA changed it): every acknowledged commit is on disk first.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import re
import secrets
import select
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from typing import Any

import psycopg
import psycopg.errors
from psycopg import pq
from psycopg.abc import Transformer as Loader
from psycopg.adapt import PyFormat, Transformer
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import ExecStatus, TransactionStatus

from reef_daemon.store.engines.engine import (
    ANSWER_WAIT_S,
    Connection,
    Cursor,
    DatabaseError,
    Disconnected,
    Engine,
    IntegrityViolation,
    SequenceMoved,
    Unanswered,
    lock_key,
)

CONNECT_TIMEOUT_S = 5  # the most a connection waits to be let in (less when `answer_wait_s` is shorter)
# The statements a write connection keeps prepared on the server (the writer's are a few dozen); past this many, a
# new one is sent unnamed (parsed and planned each time).
PREPARED_MAX = 256


WRITE_LOCK = lock_key("store-write")
MIGRATE_LOCK = lock_key("store-migrate")
NOTICE_CHANNEL = "reef_store"  # what follower.py LISTENs on
FOLLOWER_NAME = "reef-follower"  # the application_name of a follower's connection (follower.py)
_FOLLOWERS = (
    "SELECT count(*) AS followers FROM pg_stat_activity WHERE datname = current_database()"  # noqa: S608 - constants
    f" AND application_name = '{FOLLOWER_NAME}'"
)
SEQUENCE_MOVED = "RF001"  # the SQLSTATE reef_begin_write raises when the expected sequence is taken

# Opens a group commit, inside its transaction: every daemon's writer takes the lock (commits, and their
# sequences, are ordered), the NOTIFY wakes the other daemons' followers once this commits (its payload names the
# daemon, so its own follower lets it pass; none without an origin, when no other daemon follows), the commit wait
# is chosen, and the next free sequence is returned: everything committed before this transaction is below it.
# Given the one the writer expects, a higher one fails the transaction instead, before anything is written. In
# plpgsql, so its queries' plans are kept.
_BEGIN_WRITE_FUNCTION = f"""CREATE OR REPLACE FUNCTION reef_begin_write(expected bigint, flush boolean, origin text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    free bigint;
BEGIN
    PERFORM pg_advisory_xact_lock({WRITE_LOCK});
    IF origin IS NOT NULL THEN
        PERFORM pg_notify('{NOTICE_CHANNEL}', origin);
    END IF;
    IF NOT flush THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    free := greatest(coalesce((SELECT max(sequence) FROM records), 0),
                     coalesce((SELECT max(sequence) FROM events), 0)) + 1;
    IF expected IS NOT NULL AND free > expected THEN
        RAISE EXCEPTION 'another daemon committed sequence % first', free - 1 USING ERRCODE = '{SEQUENCE_MOVED}';
    END IF;
    RETURN free;
END $$"""  # noqa: S608 - made of constants
_BEGIN_WRITE = "SELECT reef_begin_write(?, ?, ?) AS next"

_PREPARE = (
    "CREATE TABLE IF NOT EXISTS reef_schema (version BIGINT NOT NULL)",
    "INSERT INTO reef_schema (version) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM reef_schema)",
    # SQLite's json_extract for the one form the store uses, a top-level key: '$.key'. IMMUTABLE, so an index
    # over it can be built (migration 7/8).
    "CREATE OR REPLACE FUNCTION json_extract(doc text, path text) RETURNS text LANGUAGE sql IMMUTABLE"
    " PARALLEL SAFE AS $$ SELECT (doc::jsonb) #>> string_to_array(substr(path, 3), '.') $$",
    _BEGIN_WRITE_FUNCTION,
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


@functools.lru_cache(maxsize=1024)
def numbered(sql: str) -> str:
    """The store's SQL for libpq's extended protocol: `?` becomes `$1`, `$2`, … outside quoted strings."""
    if sql == "BEGIN IMMEDIATE":
        return "BEGIN"
    out: list[str] = []
    quoted = False
    count = itertools.count(1)
    for char in sql:
        if char == "'":
            quoted = not quoted
            out.append(char)
        elif char == "?" and not quoted:
            out.append(f"${next(count)}")
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
    return _row_maker(cursor.pgresult)


def _row_maker(result: pq.abc.PGresult | None) -> Any:
    # The column names straight from the result (as psycopg's dict_row reads them): `description` would build a
    # Column object for each, on every query.
    names = [(result.fname(i) or b"").decode() for i in range(result.nfields)] if result is not None else []
    index = {name: position for position, name in enumerate(names)}

    def make(values: Sequence[Any]) -> Row:
        row = Row(values)
        row._index = index
        return row

    return make


class _NoAnswer(psycopg.OperationalError):
    """The server did not answer within `answer_wait_s`, nor let a new connection in (stopped, or cut off)."""


class _AnswerWaitingConnection(psycopg.Connection[Any]):
    """A psycopg connection that gives up on a server that stopped answering: a stopped server (SIGSTOP, a hung
    machine) keeps its connections open, so a statement would wait for ever. Each `answer_wait_s` without an answer
    the server is asked, on a new connection, whether it is there (`server_answers`): one working on a long
    statement is waited for again; one that does not let a new connection in either is given up on."""

    answer_wait_s: float = ANSWER_WAIT_S
    server_answers: Callable[[], bool] | None = None  # None: give up at the first wait past answer_wait_s

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        if timeout is not None:  # a wait with a bound of its own (LISTEN's notices)
            return super().wait(gen, interval, timeout)
        statement = _Resumable(gen)
        while True:
            try:
                return super().wait(statement.steps(), interval, self.answer_wait_s)
            except psycopg.errors._WaitTimeout:  # psycopg's error for the bound given above
                if self.server_answers is not None and self.server_answers():
                    continue
                self.close()  # mid-statement: nothing more can be said on it
                raise _NoAnswer(_no_answer(self.answer_wait_s)) from None


class _Resumable:
    """A statement's psycopg generator, which a wait that timed out hands on to the next one: each `steps()` starts
    from what the statement waits for now."""

    def __init__(self, gen: Generator[Any, Any, Any]) -> None:
        self._gen = gen
        self._waits_for: Any = None

    def steps(self) -> Generator[Any, Any, Any]:
        try:
            if self._waits_for is None:
                self._waits_for = next(self._gen)
            while True:
                ready = yield self._waits_for
                self._waits_for = self._gen.send(ready)
        except StopIteration as done:
            return done.value


def _no_answer(seconds: float) -> str:
    return f"the server did not answer within {seconds:g} s (store.timeout-s)"


def _store_error(exc: psycopg.Error) -> DatabaseError:
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, _NoAnswer):
        return Unanswered(detail)
    if exc.sqlstate == SEQUENCE_MOVED:
        return SequenceMoved(detail)
    if isinstance(exc, psycopg.errors.IntegrityError):
        return IntegrityViolation(detail)
    lost = (psycopg.OperationalError, psycopg.InterfaceError, psycopg.errors.AdminShutdown)
    if isinstance(exc, lost):
        return Disconnected(detail)
    return DatabaseError(detail)


# A held statement: its SQL for libpq ($n placeholders), its parameters as dumped (None: it has none), their types
# and formats, and the cursor its result goes to (None: nobody reads it).
_Held = tuple[str, list[Any] | None, tuple[int, ...], list[pq.Format] | None, "_HeldCursor | None"]
_ACCEPTED = (ExecStatus.COMMAND_OK, ExecStatus.TUPLES_OK, ExecStatus.EMPTY_QUERY)
_CHANGED_RESULT = "0A000"  # a prepared statement whose result columns changed (another daemon migrated the table)


class PostgresConnection:
    """One psycopg connection in autocommit mode; the store opens its transactions with `BEGIN` itself.

    A write transaction that `PostgresEngine.begin_write` opens is batched until it ends: a statement whose result
    nobody reads yet is held (its parameters dumped at once, so one that cannot be sent is refused before anything
    is), and the held statements go out together in one pipeline (one round trip; the server runs them in order and
    skips the rest after one fails) when a later statement needs a result, when one is inside a savepoint (a
    fallible operation's: it is confirmed at once), or with the COMMIT."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn
        self._answer_wait_s = conn.answer_wait_s if isinstance(conn, _AnswerWaitingConnection) else ANSWER_WAIT_S
        self._dumper = Transformer(conn)  # a held statement's parameters, dumped as psycopg's execute would
        self._encoding = conn.info.encoding
        # The statements prepared on the server: (SQL, parameter types) -> name. Names are never reused.
        self._prepared: dict[tuple[str, tuple[int, ...]], bytes] = {}
        self._names = itertools.count(1)
        self._stale = False  # a prepared statement's result changed: the server's are dropped at the next batch
        self._held: list[_Held] | None = None  # a write transaction's unsent statements
        self._sent = False  # whether any statement of the open write transaction went out
        self._guarded = False  # inside a savepoint: each statement is confirmed at once
        self._moved: SequenceMoved | None = None  # the batch's guess failed: refused until the next begin
        self.trusted = False  # whether the next batch may send its sequence as a guess (see begin_write)
        self.begun: _HeldCursor | None = None  # reef_begin_write's answer, unread (it comes with the COMMIT)
        self.preceding = 0  # the highest sequence committed before the open (or last) write transaction

    @property
    def in_transaction(self) -> bool:
        return self._held is not None or self._conn.info.transaction_status != TransactionStatus.IDLE

    @property
    def raw(self) -> psycopg.Connection[Any]:
        return self._conn

    @property
    def lost(self) -> bool:
        return self._conn.closed or self._conn.broken

    def idle_news(self) -> bool:
        """Whether the server sent something while the connection was idle: the goodbye of a server that stopped
        (this connection is then lost, which a plain round trip finds out before anything is sent unconfirmed)."""
        try:
            readable, _, _ = select.select([self._conn.fileno()], [], [], 0)
        except (OSError, ValueError, psycopg.Error):
            return True
        return bool(readable)

    def begin_batch(self) -> None:
        # The batch's statements are prepared here (see send), not by psycopg: one whose Parse a failed pipeline
        # skipped would stay in psycopg's cache as prepared, and fail from then on.
        self._conn.prepare_threshold = None
        if self._stale:
            self._stale = False
            self._prepared.clear()
            with contextlib.suppress(psycopg.Error):
                self._conn.execute("DEALLOCATE ALL")
        self._held, self._sent, self._guarded, self._moved = [], False, False, None

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        if self._moved is not None:
            if sql != "ROLLBACK":
                raise self._moved
            self._moved = None  # rolled back already
            return _HeldCursor()
        if self._held is None:
            try:
                if parameters:
                    return self._conn.execute(translate(sql, True), tuple(parameters))
                return self._conn.execute(translate(sql, False))
            except psycopg.Error as exc:
                raise self._failed(exc) from None
        if sql == "ROLLBACK":  # what is held belongs to the transaction it undoes: dropped unsent
            sent, self._held, self._guarded = self._sent, None, False
            if sent:
                self._send_alone("ROLLBACK")
            return _HeldCursor()
        cursor = _HeldCursor(self)
        self._held.append(self._hold(sql, parameters, cursor))
        if sql == "COMMIT":
            self.send()
            self._held, self._guarded = None, False
        elif sql.startswith("SAVEPOINT"):
            self._guarded = True
        elif sql.startswith(("RELEASE", "ROLLBACK TO")):
            self._guarded = False
        elif self._guarded:
            self.send()
        return cursor

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor:
        if self._moved is not None:
            raise self._moved
        if self._held is not None:
            self._held.extend([self._hold(sql, values, None) for values in parameters])
            if self._guarded:
                self.send()
            return _HeldCursor()
        cursor = self._conn.cursor()
        batch = [tuple(values) for values in parameters]
        if batch:
            try:
                cursor.executemany(translate(sql, True), batch)
            except psycopg.Error as exc:
                raise self._failed(exc) from None
        return cursor

    def _hold(self, sql: str, parameters: Sequence[Any], cursor: _HeldCursor | None) -> _Held:
        """A statement to hold, its parameters dumped now: one psycopg cannot dump is refused here, before anything
        of it was sent (what is held stays)."""
        if not parameters:
            return numbered(sql), None, (), None, cursor
        try:
            values = self._dumper.dump_sequence(parameters, [PyFormat.AUTO] * len(parameters))
        except psycopg.Error as exc:
            raise _store_error(exc) from None
        dumper = self._dumper
        return numbered(sql), list(values), tuple(dumper.types or ()), list(dumper.formats or ()), cursor

    def send(self) -> None:
        """Send what is held, as one pipeline, and give each statement's cursor its result (a failure is raised)."""
        held = self._held
        if not held:
            return
        self._held = []
        self._sent = True
        try:
            failure = self._pipeline(held)
        except psycopg.Error as exc:
            raise self._failed(exc) from None
        if failure is not None:
            raise self._failed(failure) from None

    def _pipeline(self, held: list[_Held]) -> psycopg.Error | None:
        """One round trip: each held statement's Bind and Execute (after its Parse, the first time), then a Sync;
        the results read in order. Returns the first statement's failure (the server skipped the rest)."""
        pgconn = self._conn.pgconn
        pending: dict[tuple[str, tuple[int, ...]], bytes] = {}  # prepared in this pipeline, once confirmed
        expected: list[tuple[str, Any]] = []  # what each result answers: ("parse", key) or ("run", cursor)
        synced: pq.abc.PGresult | None = None
        sync_sent = False
        pgconn.enter_pipeline_mode()
        try:
            for sql, values, types, formats, cursor in held:
                key = (sql, types)
                name = self._prepared.get(key) or pending.get(key)
                if name is None and len(self._prepared) + len(pending) < PREPARED_MAX:
                    name = pending[key] = f"reef_{next(self._names)}".encode()
                    pgconn.send_prepare(name, sql.encode(self._encoding), types or None)
                    expected.append(("parse", key))
                if name is None:
                    pgconn.send_query_params(sql.encode(self._encoding), values, types or None, formats)
                else:
                    pgconn.send_query_prepared(name, values, formats)
                expected.append(("run", cursor))
            pgconn.pipeline_sync()
            sync_sent = True
            self._flush(pgconn)
            failure: psycopg.Error | None = None
            for what, target in expected:
                while (result := self._result(pgconn)) is not None:
                    if result.status in _ACCEPTED:
                        if what == "parse":
                            self._prepared[target] = pending[target]
                        elif target is not None:
                            target.take(result, self._dumper)
                    elif result.status == ExecStatus.FATAL_ERROR and failure is None:
                        failure = psycopg.errors.error_from_result(result, self._encoding)
            synced = self._result(pgconn)
            if pgconn.status != pq.ConnStatus.OK or synced is None or synced.status != ExecStatus.PIPELINE_SYNC:
                # The server went away mid-way: whatever it said, this connection is lost.
                reason = failure or (synced.error_message.decode(self._encoding, "replace") if synced else "")
                raise psycopg.OperationalError(f"the connection is lost: {reason}".strip())
        finally:
            if pgconn.status == pq.ConnStatus.OK:
                with contextlib.suppress(psycopg.Error):
                    if not sync_sent:  # cut short before the Sync: what was sent is ended, and read
                        pgconn.pipeline_sync()
                        self._flush(pgconn)
                    while synced is None or synced.status != ExecStatus.PIPELINE_SYNC:
                        synced = self._result(pgconn)
                    pgconn.exit_pipeline_mode()
        return failure

    def _flush(self, pgconn: pq.abc.PGconn) -> None:
        """Send libpq's buffer (the connection is nonblocking), reading whatever comes meanwhile."""
        deadline = time.monotonic() + self._answer_wait_s
        while pgconn.flush():
            poll = select.poll()
            poll.register(pgconn.socket, select.POLLIN | select.POLLOUT)
            if any(events & select.POLLIN for _fd, events in self._poll(poll, deadline)):
                pgconn.consume_input()

    def _result(self, pgconn: pq.abc.PGconn) -> pq.abc.PGresult | None:
        """The next result, waiting for it without holding the interpreter."""
        if pgconn.is_busy():
            deadline = time.monotonic() + self._answer_wait_s
            poll = select.poll()
            poll.register(pgconn.socket, select.POLLIN)
            while True:
                self._poll(poll, deadline)
                pgconn.consume_input()
                if not pgconn.is_busy():
                    break
        return pgconn.get_result()

    def _poll(self, poll: select.poll, deadline: float) -> list[tuple[int, int]]:
        """Wait for the socket until `deadline`, and on while the server says it is there (as psycopg's waits do);
        a server that does not is taken for gone (the connection closed)."""
        while not (ready := poll.poll(max(0.0, deadline - time.monotonic()) * 1000)):
            answers = self._conn.server_answers if isinstance(self._conn, _AnswerWaitingConnection) else None
            if answers is None or not answers():
                self._conn.close()
                raise _NoAnswer(_no_answer(self._answer_wait_s))
            deadline = time.monotonic() + self._answer_wait_s
        return ready

    def _send_alone(self, sql: str) -> None:
        try:
            self._conn.execute(sql)
        except psycopg.Error as exc:
            raise self._failed(exc) from None

    def _failed(self, exc: psycopg.Error) -> DatabaseError:
        """What a failed statement raises; what was held with it is dropped (the transaction has failed). A sequence
        that moved also rolls the transaction back at once, and refuses the rest of the batch, which runs again."""
        error = _store_error(exc)
        if exc.sqlstate == _CHANGED_RESULT:
            self._stale = True
        held, self._held, self._guarded = self._held, None, False
        if held is not None and isinstance(error, SequenceMoved):
            self.trusted = False
            with contextlib.suppress(psycopg.Error):
                self._conn.execute("ROLLBACK")
            self._moved = error
        elif held is not None:
            self._held = []  # the transaction is open (failed): its ROLLBACK is sent
        return error

    def close(self) -> None:
        self._held = None
        self._conn.close()


class _HeldCursor:
    """The cursor of a statement held in a write transaction: reading its result sends what is held first."""

    def __init__(self, owner: PostgresConnection | None = None) -> None:
        self._owner = owner  # None: a statement with no result (one dropped, a ROLLBACK)
        self._rows: list[Any] = []
        self._rowcount = -1

    def take(self, result: pq.abc.PGresult, loader: Loader) -> None:
        """This statement's result, from the pipeline it was sent in."""
        self._owner = None
        tuples = result.command_tuples
        self._rowcount = tuples if tuples is not None else -1
        if result.nfields and result.ntuples:
            loader.set_pgresult(result)
            self._rows = loader.load_rows(0, result.ntuples, _row_maker(result))

    def _wait(self) -> None:
        if self._owner is not None:
            self._owner.send()

    @property
    def rowcount(self) -> int:
        self._wait()
        return self._rowcount

    def fetchone(self) -> Any:
        self._wait()
        return self._rows.pop(0) if self._rows else None

    def fetchall(self) -> list[Any]:
        self._wait()
        rows, self._rows = self._rows, []
        return rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())

    def close(self) -> None:
        self._rows = []


class PostgresEngine(Engine):
    """A PostgreSQL database (14 or newer) several daemons share."""

    name = "postgresql"
    shared = True

    def __init__(self, url: str, *, flush: bool = False, answer_wait_s: float = ANSWER_WAIT_S) -> None:
        super().__init__(url, flush=flush)  # flush: keep the server's synchronous_commit (the module's docstring)
        self.url = url
        self.answer_wait_s = answer_wait_s  # the longest wait for the server's answer (store.timeout-s)
        self.origin = secrets.token_hex(8)  # names this daemon's commits in their NOTIFY
        # Whether another daemon follows the store, as this daemon's follower last saw: with none, a commit sends
        # no NOTIFY (this daemon's follower would only wake to let it pass). A daemon that starts meanwhile reads
        # the commits its NOTIFY would have announced within its follower's POLL_S.
        self.followed = True

    def describe(self) -> str:
        try:
            parts = conninfo_to_dict(self.url)
        except psycopg.Error:
            return "postgresql://(unparsable URL)"
        user = f"{parts['user']}@" if parts.get("user") else ""
        host, port, database = (str(parts.get(key) or "") for key in ("host", "port", "dbname"))
        if host.startswith(("/", "@")) or (not host and not parts.get("hostaddr")):
            # A Unix-domain socket's folder (libpq's default one when no host is given), as a URL names it.
            query = "&".join(f"{key}={value}" for key, value in (("host", host), ("port", port)) if value)
            return f"postgresql://{user}/{database}" + (f"?{query}" if query else "")
        port = f":{port}" if port.strip(",") else ""
        return f"postgresql://{user}{host}{port}/{database}"

    def connect(self, *, readonly: bool = False) -> Connection:
        conn = self._connect("-c default_transaction_read_only=on" if readonly else "")
        conn.server_answers = self._answers
        return PostgresConnection(conn)

    def _answers(self) -> bool:
        """Whether the server lets a new connection in and answers on it, each within answer_wait_s."""
        try:
            with self._connect("") as probe:
                probe.execute("SELECT 1")
        except (psycopg.Error, DatabaseError):
            return False
        return True

    def _connect(self, options: str) -> _AnswerWaitingConnection:
        try:
            conn = _AnswerWaitingConnection.connect(
                self.url,
                autocommit=True,
                row_factory=_row_factory,
                # libpq waits at least 2 s, in whole seconds
                connect_timeout=max(2, math.ceil(min(CONNECT_TIMEOUT_S, self.answer_wait_s))),
                application_name="reef",
                options=options,
            )
        except psycopg.errors.ConnectionTimeout:
            raise Unanswered(f"cannot reach {self.describe()}: {_no_answer(self.answer_wait_s)}") from None
        except psycopg.Error as exc:
            raise Disconnected(f"cannot reach {self.describe()}: {_store_error(exc)}") from None
        conn.answer_wait_s = self.answer_wait_s
        return conn

    def connect_writer(self) -> Connection:
        return self.connect()

    def begin_write(self, conn: Connection, next_sequence: int, *, wait: bool = True) -> int:
        # `wait` is a file's: a server's commits always wait (commits_without_waiting), so nothing asks otherwise.
        # The writer's own count is sent as a guess when its last batch found it right: then nothing waits for the
        # answer, which comes back with the COMMIT (a wrong guess fails the batch early, with SequenceMoved, and
        # it runs again). Otherwise, or when the idle connection has news (a stopped server's goodbye, found by
        # this round trip before anything is sent unconfirmed), the number is read under the lock first.
        assert isinstance(conn, PostgresConnection)
        guess = conn.trusted and not conn.idle_news()
        conn.begin_batch()
        conn.execute("BEGIN")
        origin = self.origin if self.followed else None
        cursor = conn.execute(_BEGIN_WRITE, (next_sequence if guess else None, self.flush, origin))
        if guess:
            assert isinstance(cursor, _HeldCursor)
            conn.begun = cursor
            return next_sequence
        conn.begun = None
        free = int(cursor.fetchone()["next"])
        conn.preceding = free - 1
        conn.trusted = free <= next_sequence  # no other daemon committed since this one's last commit
        return free

    def commits_without_waiting(self) -> bool:
        return False  # every commit is a round trip to the server

    def preceding(self, conn: Connection) -> int | None:
        assert isinstance(conn, PostgresConnection)
        begun, conn.begun = conn.begun, None
        if begun is not None:  # the guess held: the answer came back with the COMMIT
            try:
                conn.preceding = int(begun.fetchone()["next"]) - 1
            except DatabaseError:
                return None  # committed all the same; its events are then announced as the other daemons' are
        return conn.preceding

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

    def wait_for_notice(self, conn: Connection, timeout: float) -> bool:
        assert isinstance(conn, PostgresConnection)
        deadline = time.monotonic() + timeout
        try:
            while (left := deadline - time.monotonic()) > 0:
                for notice in conn.raw.notifies(timeout=left, stop_after=1):
                    if notice.payload != self.origin:  # this daemon's own commits its writer announced
                        self.followed = True
                        return True
            self.followed = int(conn.execute(_FOLLOWERS).fetchone()["followers"]) > 1
        except psycopg.Error as exc:
            raise _store_error(exc) from None
        return False

    def lost(self, conn: Connection) -> bool:
        return isinstance(conn, PostgresConnection) and conn.lost
