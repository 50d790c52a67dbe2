"""Steps: what a recipe did with the records it consumed. A step, its consumed records and the scenario's read
position are committed in one transaction, so a unit trains at most once and a restart resumes where it ended.

Steps are numbered 1, 2, 3 …; versions count only the steps that made one (selected or pending), so a skipped or
rejected step takes no version number and the versions run v1, v2, v3 … without gaps (v0 is the scenario's base).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from reef_contract import RecordType, StepRow, StoredRecord
from reef_daemon.errors import Conflict
from reef_daemon.harness.tables.canaries import end_canary
from reef_daemon.store.engines.engine import INTEGRITY_ERRORS, Columns, Connection
from reef_daemon.store.engines.reader import Reader
from reef_daemon.store.engines.schema import of_types
from reef_daemon.store.engines.writer import GroupCommitWriter, WriteContext
from reef_daemon.store.rows import DETAIL_COLUMNS, detail_row

STEP_COLUMNS = (
    "scenario, step, operation, result, release_id, parent_release_id, request_id, consumed, metrics, created_at"
)
STEP_RESULTS = ("selected", "rejected", "skipped", "pending")
VERSIONED = ("selected", "pending")  # the results of steps that made a version; skipped and rejected made none
# The versions made up to and including each step, read beside STEP_COLUMNS.
VERSIONS_SO_FAR = "count(CASE WHEN result IN ('selected', 'pending') THEN 1 END) OVER (ORDER BY step) AS versions_made"


@dataclass(frozen=True)
class StepCommit:
    """One step to commit. `step` is the number it must get: the previous step plus one."""

    scenario: str
    step: int
    operation: str  # training | rollback | promote
    result: str  # selected | rejected | skipped | pending
    consumed: tuple[str, ...] = ()
    metrics: dict[str, Any] = field(default_factory=dict)
    release_id: str | None = None
    parent_release_id: str | None = None
    request_id: str | None = None
    cursor: int | None = None  # the scenario's new read position, when the step moves it


def step_row(row: Columns) -> StepRow:
    """A row of STEP_COLUMNS with the versions made so far (VERSIONS_SO_FAR's `versions_made`)."""
    return {
        "scenario": row["scenario"],
        "step": row["step"],
        "version": f"v{row['versions_made']}" if row["result"] in VERSIONED else None,
        "operation": row["operation"],
        "result": row["result"],
        "release_id": row["release_id"],
        "parent_release_id": row["parent_release_id"],
        "request_id": row["request_id"],
        "consumed": json.loads(row["consumed"]),
        "metrics": json.loads(row["metrics"]),
        "created_at": row["created_at"],
    }


class StepStore:
    def __init__(self, writer: GroupCommitWriter, reader: Reader) -> None:
        self._writer = writer
        self._reader = reader

    async def commit(self, commit: StepCommit) -> StepRow:
        """Commit a step with its consumed records; Conflict if the number is taken or a record was consumed."""
        return await self._writer.submit(lambda ctx: self._commit(ctx, commit))

    @staticmethod
    def _commit(ctx: WriteContext, commit: StepCommit) -> StepRow:
        conn = ctx.conn
        last = conn.execute(
            "SELECT coalesce(max(step), 0) AS last FROM steps WHERE scenario = ?", (commit.scenario,)
        ).fetchone()["last"]
        if commit.step != last + 1:
            raise Conflict(f"step {commit.step} of {commit.scenario} is stale; the last step is {last}")
        made = conn.execute(
            "SELECT count(*) AS made FROM steps WHERE scenario = ? AND result IN ('selected', 'pending')",
            (commit.scenario,),
        ).fetchone()["made"]
        columns = {
            "scenario": commit.scenario, "step": commit.step, "operation": commit.operation, "result": commit.result,
            "release_id": commit.release_id, "parent_release_id": commit.parent_release_id,
            "request_id": commit.request_id, "consumed": json.dumps(list(commit.consumed)),
            "metrics": json.dumps(commit.metrics), "created_at": time.time(),
        }  # fmt: skip
        marks = ",".join("?" * len(columns))
        conn.execute(f"INSERT INTO steps ({', '.join(columns)}) VALUES ({marks})", tuple(columns.values()))  # noqa: S608
        try:
            conn.executemany(
                "INSERT INTO consumed_records (record_id, scenario, step) VALUES (?,?,?)",
                [(record_id, commit.scenario, commit.step) for record_id in commit.consumed],
            )
        except INTEGRITY_ERRORS:
            raise Conflict("a record in this step was already consumed by an earlier step") from None
        if commit.cursor is not None:
            _set_cursor(conn, commit.scenario, commit.cursor)
        row = step_row({**columns, "versions_made": made + 1})  # the version this step makes, if it makes one
        ctx.record_event("step", commit.scenario, {"step": row})
        if commit.release_id is not None and commit.result in ("selected", "pending"):
            ctx.record_event("release", commit.scenario, {"release": row})
        if commit.release_id is not None and commit.result == "selected":
            # What serves changed: a canary that ran beside the old head has nothing left to compare with.
            end_canary(ctx, commit.scenario, "ended", f"{commit.operation} made {row['version']} the served version")
        return row

    async def mark_ineligible(self, scenario: str, verdicts: list[tuple[str, str]], cursor: int) -> None:
        """Record why these records will never be trained on, and move the read position past them."""

        def write(ctx: WriteContext) -> None:
            now = time.time()
            ctx.conn.executemany(
                "INSERT INTO ineligible_records (record_id, scenario, reason, created_at) VALUES (?,?,?,?)"
                " ON CONFLICT DO NOTHING",
                [(record_id, scenario, reason, now) for record_id, reason in verdicts],
            )
            _set_cursor(ctx.conn, scenario, cursor)

        await self._writer.submit(write)

    async def cursor(self, scenario: str) -> int:
        def read(conn: Connection) -> int:
            row = conn.execute("SELECT sequence FROM recipe_cursors WHERE scenario = ?", (scenario,)).fetchone()
            return int(row["sequence"]) if row else 0

        return await self._reader.run(read)

    async def pending(
        self, scenario: str, after: int, types: tuple[RecordType, ...], limit: int = 256
    ) -> list[StoredRecord]:
        """Full rows of the given types after `after`, in order, that no step consumed and none judged ineligible."""

        def read(conn: Connection) -> list[StoredRecord]:
            of_type, type_values = of_types(types)
            rows = conn.execute(
                f"SELECT {DETAIL_COLUMNS} FROM records WHERE scenario = ? AND {of_type} AND sequence > ?"  # noqa: S608
                " AND id NOT IN (SELECT record_id FROM consumed_records)"
                " AND id NOT IN (SELECT record_id FROM ineligible_records) ORDER BY sequence LIMIT ?",
                (scenario, *type_values, after, limit),
            ).fetchall()
            return [detail_row(row) for row in rows]

        return await self._reader.run(read)

    async def history(self, scenario: str) -> list[StepRow]:
        """Every step of a scenario, newest first."""

        def read(conn: Connection) -> list[StepRow]:
            rows = conn.execute(
                f"SELECT {STEP_COLUMNS}, {VERSIONS_SO_FAR} FROM steps WHERE scenario = ? ORDER BY step DESC",  # noqa: S608
                (scenario,),
            )
            return [step_row(row) for row in rows]

        return await self._reader.run(read)

    async def last(self, scenario: str) -> StepRow | None:
        def read(conn: Connection) -> StepRow | None:
            row = conn.execute(
                f"SELECT {STEP_COLUMNS}, {VERSIONS_SO_FAR} FROM steps WHERE scenario = ?"  # noqa: S608
                " ORDER BY step DESC LIMIT 1",
                (scenario,),
            ).fetchone()
            return step_row(row) if row else None

        return await self._reader.run(read)

    async def consumed_by(self, record_ids: list[str]) -> dict[str, int]:
        """For each of these records that a step consumed, that step's number."""

        def read(conn: Connection) -> dict[str, int]:
            marks = ",".join("?" * len(record_ids))
            rows = conn.execute(
                f"SELECT record_id, step FROM consumed_records WHERE record_id IN ({marks})",  # noqa: S608
                record_ids,
            )
            return {row["record_id"]: row["step"] for row in rows}

        return await self._reader.run(read) if record_ids else {}

    async def ineligible(self, scenario: str) -> dict[str, int]:
        """How many records were judged ineligible, by reason."""

        def read(conn: Connection) -> dict[str, int]:
            rows = conn.execute(
                "SELECT reason, count(*) AS total FROM ineligible_records WHERE scenario = ? GROUP BY reason",
                (scenario,),
            )
            return {row["reason"]: row["total"] for row in rows}

        return await self._reader.run(read)

    async def release_home(self, scenario: str, home: str) -> str:
        """Where the scenario's releases are kept: `home`, if nobody named one before; else the one named first."""

        def write(ctx: WriteContext) -> str:
            ctx.conn.execute(
                "INSERT INTO release_homes (scenario, home) VALUES (?, ?) ON CONFLICT DO NOTHING", (scenario, home)
            )
            row = ctx.conn.execute("SELECT home FROM release_homes WHERE scenario = ?", (scenario,)).fetchone()
            return str(row["home"])

        return await self._writer.submit(write)

    async def ineligible_reason(self, record_id: str) -> str | None:
        def read(conn: Connection) -> str | None:
            row = conn.execute("SELECT reason FROM ineligible_records WHERE record_id = ?", (record_id,)).fetchone()
            return str(row["reason"]) if row else None

        return await self._reader.run(read)


def _set_cursor(conn: Connection, scenario: str, sequence: int) -> None:
    conn.execute(
        "INSERT INTO recipe_cursors (scenario, sequence) VALUES (?, ?)"
        " ON CONFLICT (scenario) DO UPDATE SET sequence = CASE WHEN excluded.sequence > recipe_cursors.sequence"
        " THEN excluded.sequence ELSE recipe_cursors.sequence END",
        (scenario, sequence),
    )
