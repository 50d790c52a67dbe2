"""A scenario's evaluation tasks, and its replays: the opening turns of its recent low-scored conversations, offered
as tasks until a person promotes one to a protected task or dismisses it. `gate_tasks` is what an evaluation runs.

Records hold no workspace files today, so a replay's fixture is always empty.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from reef_contract import (
    REPLAY_ID_PREFIX,
    REPORT_SOURCES,
    TASK_ID_PREFIX,
    EvalTask,
    ScoreScale,
    low_score_below,
)
from reef_daemon.errors import BadRequest, Conflict, NotFound
from reef_daemon.records import opening_turn
from reef_daemon.store.engines.engine import Columns, Connection
from reef_daemon.store.engines.reader import Reader
from reef_daemon.store.engines.writer import GroupCommitWriter, WriteContext
from reef_daemon.store.source_scores import score_of

if TYPE_CHECKING:
    from reef_daemon.store.view import StoreView

TASK_COLUMNS = "id, scenario, prompt, fixture, regex, judge, protected, source_record, created_at"
REPLAY_PAGE = 50  # low-scored records read at a time while looking for replays
REPLAY_SCAN = 200  # the most low-scored records looked at for one list of replays (their requests are parsed)
PAGE_FIXTURE_CHARS = 4_000_000  # a page of tasks ends after the task that brings its fixtures past this
Tasks = list[EvalTask]  # (TaskStore.list shadows `list` in the class body)


@dataclass(frozen=True)
class TaskDraft:
    """A task to store, already checked (see reef_daemon/task_input.py)."""

    scenario: str
    prompt: str
    fixture: dict[str, str] = field(default_factory=dict)
    regex: str | None = None
    judge: str | None = None
    protected: bool = False
    source_record: str | None = None


@dataclass(frozen=True)
class TaskLimits:
    """What one scenario may hold: tasks (harness.max-tasks), and characters of all their fixtures together
    (harness.max-task-fixture-chars); the defaults are the settings' defaults."""

    tasks: int = 200
    fixture_chars: int = 20_000_000


@dataclass(frozen=True)
class TaskPage:
    """Stored tasks, oldest first, and the id to list after for the next page (None: this is the last)."""

    tasks: list[EvalTask]
    next_after: str | None


class TaskStore:
    def __init__(self, writer: GroupCommitWriter, reader: Reader, score_scale: ScoreScale) -> None:
        self._writer = writer
        self._reader = reader
        self._below = low_score_below(score_scale)

    async def add(self, draft: TaskDraft, limits: TaskLimits | None = None) -> EvalTask:
        """Store a task; returns it with its new id. Conflict when the scenario would hold more than `limits`."""
        task = _task_of(draft, f"{TASK_ID_PREFIX}{os.urandom(8).hex()}", time.time())

        def write(ctx: WriteContext) -> None:
            _check_room(ctx.conn, task, limits or TaskLimits())
            _insert(ctx.conn, task)

        await self._writer.submit(write)
        return task

    async def list(self, scenario: str) -> Tasks:
        """The scenario's stored tasks, oldest first (all of them: bounded by `TaskLimits` when added)."""
        return await self._reader.run(lambda conn: _tasks(conn, scenario))

    async def page(self, scenario: str, after: str | None, limit: int) -> TaskPage:
        """Up to `limit` of the scenario's stored tasks, oldest first, after the task `after` (None: from the
        first); a page also ends once its fixtures pass `PAGE_FIXTURE_CHARS`."""
        return await self._reader.run(lambda conn: _page(conn, scenario, after, limit))

    async def get(self, scenario: str, task_id: str) -> EvalTask:
        """A stored task, or a replay that is still offered; NotFound otherwise."""
        if task_id.startswith(REPLAY_ID_PREFIX):
            record_id = task_id.removeprefix(REPLAY_ID_PREFIX)
            return await self._reader.run(lambda conn: _offered_replay(conn, scenario, record_id))
        return await self._reader.run(lambda conn: _task(conn, scenario, task_id))

    async def remove(self, scenario: str, task_id: str) -> EvalTask:
        """Delete a stored task; returns what it was. A replay is dismissed instead, not removed."""
        if task_id.startswith(REPLAY_ID_PREFIX):
            raise BadRequest(f"'{task_id}' is a replay, not a stored task; dismiss it instead", type="replay_not_task")

        def write(ctx: WriteContext) -> EvalTask:
            task = _task(ctx.conn, scenario, task_id)
            ctx.conn.execute("DELETE FROM eval_tasks WHERE id = ?", (task_id,))
            return task

        return await self._writer.submit(write)

    async def replays(self, scenario: str, limit: int, sources: Collection[str] = REPORT_SOURCES) -> Tasks:
        """Up to `limit` replays, newest conversation first: the opening turns of the scenario's inference records
        low-scored by `sources` that are not dismissed, not promoted, not already a task's prompt, and not repeated."""
        return await self._reader.run(lambda conn: _replays(conn, scenario, self._below, limit, score_of(sources)))

    async def promote(self, scenario: str, replay_id: str) -> EvalTask:
        """Make a replay a protected task (its source record kept); it is no longer offered as a replay."""
        record_id = _record_of(replay_id)

        def write(ctx: WriteContext) -> EvalTask:
            replay = _offered_replay(ctx.conn, scenario, record_id)
            draft = TaskDraft(scenario, replay["prompt"], replay["fixture"], protected=True, source_record=record_id)
            task = _task_of(draft, f"{TASK_ID_PREFIX}{os.urandom(8).hex()}", time.time())
            _insert(ctx.conn, task)
            _decide(ctx.conn, scenario, record_id, "promoted", replay["prompt"])
            return task

        return await self._writer.submit(write)

    async def dismiss(self, scenario: str, replay_id: str) -> None:
        """Stop offering a replay, and any other conversation that opened with the same words."""
        record_id = _record_of(replay_id)

        def write(ctx: WriteContext) -> None:
            decided = _decision(ctx.conn, record_id)
            if decided == "dismissed":
                return  # dismissing twice is dismissing once
            replay = _offered_replay(ctx.conn, scenario, record_id)
            _decide(ctx.conn, scenario, record_id, "dismissed", replay["prompt"])

        await self._writer.submit(write)


async def gate_tasks(
    store: StoreView, scenario: str, replays: int, sources: Collection[str] = REPORT_SOURCES
) -> list[EvalTask]:
    """What an evaluation of a candidate runs: every protected task of the scenario (oldest first), then up to
    `replays` replays (newest conversation first) of conversations low-scored by `sources`."""
    protected = [task for task in await store.tasks.list(scenario) if task["protected"]]
    return protected + await store.tasks.replays(scenario, replays, sources)


def _record_of(replay_id: str) -> str:
    if not replay_id.startswith(REPLAY_ID_PREFIX):
        raise BadRequest(
            f"'{replay_id}' is not a replay; only replays (ids starting {REPLAY_ID_PREFIX}) are promoted or dismissed",
            type="not_a_replay",
        )
    return replay_id.removeprefix(REPLAY_ID_PREFIX)


def _task_of(draft: TaskDraft, task_id: str, created_at: float) -> EvalTask:
    return {
        "id": task_id,
        "scenario": draft.scenario,
        "kind": "task",
        "prompt": draft.prompt,
        "fixture": dict(draft.fixture),
        "regex": draft.regex,
        "judge": draft.judge,
        "protected": draft.protected,
        "source_record": draft.source_record,
        "created_at": created_at,
    }


def _insert(conn: Connection, task: EvalTask) -> None:
    conn.execute(
        f"INSERT INTO eval_tasks ({TASK_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",  # noqa: S608 - a constant
        (
            task["id"], task["scenario"], task["prompt"], json.dumps(task["fixture"], ensure_ascii=False),
            task["regex"], task["judge"], int(task["protected"]), task["source_record"], task["created_at"],
        ),
    )  # fmt: skip


def _check_room(conn: Connection, task: EvalTask, limits: TaskLimits) -> None:
    scenario = task["scenario"]
    count, chars = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(LENGTH(fixture)), 0) FROM eval_tasks WHERE scenario = ?", (scenario,)
    ).fetchone()
    if count >= limits.tasks:
        raise Conflict(
            f"scenario '{scenario}' already holds {count} tasks, the most it may (the setting harness.max-tasks); "
            "remove one first",
            type="too_many_tasks",
        )
    added = len(json.dumps(task["fixture"], ensure_ascii=False))
    if chars + added > limits.fixture_chars:
        raise Conflict(
            f"scenario '{scenario}' would hold {chars + added} characters of task fixtures, over its "
            f"{limits.fixture_chars} (the setting harness.max-task-fixture-chars); remove a task first",
            type="too_many_tasks",
        )


def _page(conn: Connection, scenario: str, after: str | None, limit: int) -> TaskPage:
    where, args = "scenario = ?", [scenario]
    if after is not None:
        start = conn.execute(
            "SELECT created_at, id FROM eval_tasks WHERE id = ? AND scenario = ?", (after, scenario)
        ).fetchone()
        if start is None:
            raise NotFound(f"scenario '{scenario}' has no task '{after}' to list after", type="unknown_task")
        where += " AND (created_at, id) > (?, ?)"
        args += [start["created_at"], start["id"]]
    rows = conn.execute(
        f"SELECT {TASK_COLUMNS} FROM eval_tasks WHERE {where} ORDER BY created_at, id LIMIT ?",  # noqa: S608
        (*args, limit + 1),
    )
    tasks: list[EvalTask] = []
    chars = 0
    for row in rows:
        if len(tasks) == limit or chars > PAGE_FIXTURE_CHARS:
            return TaskPage(tasks, tasks[-1]["id"])
        chars += len(row["fixture"])
        tasks.append(_row(row))
    return TaskPage(tasks, None)


def _row(row: Columns) -> EvalTask:
    return {
        "id": row["id"],
        "scenario": row["scenario"],
        "kind": "task",
        "prompt": row["prompt"],
        "fixture": json.loads(row["fixture"]),
        "regex": row["regex"],
        "judge": row["judge"],
        "protected": bool(row["protected"]),
        "source_record": row["source_record"],
        "created_at": row["created_at"],
    }


def _tasks(conn: Connection, scenario: str) -> list[EvalTask]:
    rows = conn.execute(
        f"SELECT {TASK_COLUMNS} FROM eval_tasks WHERE scenario = ? ORDER BY created_at, id",  # noqa: S608
        (scenario,),
    )
    return [_row(row) for row in rows]


def _task(conn: Connection, scenario: str, task_id: str) -> EvalTask:
    row = conn.execute(
        f"SELECT {TASK_COLUMNS} FROM eval_tasks WHERE id = ? AND scenario = ?",  # noqa: S608
        (task_id, scenario),
    ).fetchone()
    if row is None:
        raise NotFound(f"scenario '{scenario}' has no task '{task_id}'", type="unknown_task")
    return _row(row)


def _replay(scenario: str, record_id: str, prompt: str, created_at: float) -> EvalTask:
    return {
        "id": f"{REPLAY_ID_PREFIX}{record_id}",
        "scenario": scenario,
        "kind": "replay",
        "prompt": prompt,
        "fixture": {},  # records keep no workspace files
        "regex": None,
        "judge": None,
        "protected": False,
        "source_record": record_id,
        "created_at": created_at,
    }


def _replays(conn: Connection, scenario: str, below: float, limit: int, score: str) -> list[EvalTask]:
    decided_sql = "SELECT record_id, prompt FROM replay_decisions WHERE scenario = ?"
    decisions = conn.execute(decided_sql, (scenario,)).fetchall()
    decided = {row["record_id"] for row in decisions}
    # A prompt already decided on, or already a task, is not offered again from another conversation.
    seen = {row["prompt"] for row in decisions}
    seen |= {row["prompt"] for row in conn.execute("SELECT prompt FROM eval_tasks WHERE scenario = ?", (scenario,))}
    found: list[EvalTask] = []
    for offset in range(0, REPLAY_SCAN, REPLAY_PAGE):
        if len(found) >= limit:
            break
        rows = conn.execute(
            "SELECT id, route, request, created_at FROM records WHERE scenario = ? AND type = 'inference'"  # noqa: S608
            f" AND {score} IS NOT NULL AND {score} < ? ORDER BY sequence DESC LIMIT ? OFFSET ?",
            (scenario, below, REPLAY_PAGE, offset),
        ).fetchall()
        for row in rows:
            if row["id"] in decided:
                continue
            prompt = opening_turn(str(row["route"]), row["request"])
            if prompt is None or prompt in seen:
                continue
            seen.add(prompt)
            found.append(_replay(scenario, row["id"], prompt, row["created_at"]))
            if len(found) >= limit:
                break
        if len(rows) < REPLAY_PAGE:
            break
    return found


def _offered_replay(conn: Connection, scenario: str, record_id: str) -> EvalTask:
    """The replay of one of the scenario's inference records: any record with an opening turn, low-scored or not, may
    be made a task; one already promoted or dismissed is refused."""
    row = conn.execute(
        "SELECT route, request, created_at FROM records WHERE id = ? AND scenario = ? AND type = 'inference'",
        (record_id, scenario),
    ).fetchone()
    if row is None:
        raise NotFound(f"scenario '{scenario}' has no conversation '{record_id}' to replay", type="unknown_task")
    prompt = opening_turn(str(row["route"]), row["request"])
    if prompt is None:
        raise BadRequest(f"record '{record_id}' has no user turn to replay", type="no_user_turn")
    decided = _decision(conn, record_id)
    if decided is not None:
        raise Conflict(f"the replay of record '{record_id}' was already {decided}", type=f"replay_{decided}")
    return _replay(scenario, record_id, prompt, row["created_at"])


def _decision(conn: Connection, record_id: str) -> str | None:
    row = conn.execute("SELECT decision FROM replay_decisions WHERE record_id = ?", (record_id,)).fetchone()
    return None if row is None else str(row["decision"])


def _decide(conn: Connection, scenario: str, record_id: str, decision: str, prompt: str) -> None:
    conn.execute(
        "INSERT INTO replay_decisions (record_id, scenario, decision, prompt, created_at) VALUES (?,?,?,?,?)"
        " ON CONFLICT (record_id) DO UPDATE SET scenario = excluded.scenario, decision = excluded.decision,"
        " prompt = excluded.prompt, created_at = excluded.created_at",
        (record_id, scenario, decision, prompt, time.time()),
    )
