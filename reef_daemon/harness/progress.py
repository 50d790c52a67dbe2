"""The durable progress of change requests: phase, activity lines, design and outcome, one row per request.

Every change is committed through the store's writer and announced as a `request` event, so `reef request --wait`,
the TUI and `GET /reef/requests/{id}` see the same thing, and a restart keeps it. Whether a request has settled,
its result and its version are not kept here: the committed step that consumed the request is the truth for those.
"""

from __future__ import annotations

import json
import time
from typing import Any

from reef_contract import RequestEvent
from reef_daemon.store import Store
from reef_daemon.store.engines.engine import Columns, Connection
from reef_daemon.store.engines.writer import WriteContext

MAX_ACTIVITY = 200
_COLUMNS = "id, scenario, state, design, activity, outcome, started_at, updated_at"


def _row(row: Columns) -> dict[str, Any]:
    return {
        "id": row["id"],
        "scenario": row["scenario"],
        "state": row["state"],
        "design": row["design"],
        "activity": json.loads(row["activity"]),
        "outcome": json.loads(row["outcome"]) if row["outcome"] else None,
        "started_at": row["started_at"],
        "updated_at": row["updated_at"],
    }


class RequestProgress:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def begin(self, request_id: str, scenario: str) -> None:
        """A step starts on this request. A row left by a step a restart interrupted is continued, and says so."""

        def write(ctx: WriteContext) -> None:
            now = time.time()
            existing = _read(ctx.conn, request_id)
            if existing is None:
                ctx.conn.execute(
                    f"INSERT INTO harness_requests ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?)",  # noqa: S608
                    (request_id, scenario, "proposing", None, "[]", None, now, now),
                )
            _append(ctx, request_id, "proposing", "started: choosing the proposer", now)

        await self._store.writer.submit(write)

    async def note(self, request_id: str, text: str, *, state: str | None = None, design: str | None = None) -> None:
        """Add an activity line; optionally move to another phase or record the design."""

        def write(ctx: WriteContext) -> None:
            if design is not None:
                ctx.conn.execute("UPDATE harness_requests SET design = ? WHERE id = ?", (design, request_id))
            _append(ctx, request_id, state, text, time.time())

        await self._store.writer.submit(write)

    async def finish(self, request_id: str, outcome: dict[str, Any], text: str) -> None:
        """The step decided; the outcome (result, reason, release) waits for the step's commit to settle it."""

        def write(ctx: WriteContext) -> None:
            ctx.conn.execute("UPDATE harness_requests SET outcome = ? WHERE id = ?", (json.dumps(outcome), request_id))
            _append(ctx, request_id, "settling", text, time.time())

        await self._store.writer.submit(write)

    async def get(self, request_id: str) -> dict[str, Any] | None:
        return await self._store.reader.run(lambda conn: _read(conn, request_id))


def _read(conn: Connection, request_id: str) -> dict[str, Any] | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM harness_requests WHERE id = ?", (request_id,)).fetchone()  # noqa: S608
    return _row(row) if row else None


def _append(ctx: WriteContext, request_id: str, state: str | None, text: str, now: float) -> None:
    row = _read(ctx.conn, request_id)
    if row is None:  # a note for a request whose step never began: nothing to attach it to
        return
    activity = [*row["activity"], {"at": now, "text": text}][-MAX_ACTIVITY:]
    new_state = state or row["state"]
    ctx.conn.execute(
        "UPDATE harness_requests SET state = ?, activity = ?, updated_at = ? WHERE id = ?",
        (new_state, json.dumps(activity), now, request_id),
    )
    moved: RequestEvent = {"request": {"id": request_id, "state": new_state, "activity": text}, "record": None}
    ctx.record_event("request", row["scenario"], moved)
