"""Canaries: per scenario, at most one release served to a share of new sessions beside the served one. Kept in
the database, so a canary survives a restart; starting and ending one records a `canary` event that says why."""

from __future__ import annotations

import sqlite3
import time

from reef_daemon.contract import CANARY_EVENT, CanaryState
from reef_daemon.store.reader import Reader
from reef_daemon.store.writer import GroupCommitWriter, WriteContext

_COLUMNS = "scenario, release_id, version, share, served_release_id, started_at"


def _state(row: sqlite3.Row) -> CanaryState:
    return {
        "scenario": str(row["scenario"]),
        "release_id": str(row["release_id"]),
        "version": str(row["version"]),
        "share": float(row["share"]),
        "served_release_id": str(row["served_release_id"]),
        "started_at": float(row["started_at"]),
    }


class CanaryStore:
    def __init__(self, writer: GroupCommitWriter, reader: Reader) -> None:
        self._writer = writer
        self._reader = reader

    async def start(self, scenario: str, release_id: str, version: str, share: float, served: str) -> CanaryState:
        """Start (or replace) the scenario's canary."""

        def write(ctx: WriteContext) -> CanaryState:
            state: CanaryState = {
                "scenario": scenario,
                "release_id": release_id,
                "version": version,
                "share": share,
                "served_release_id": served,
                "started_at": time.time(),
            }
            ctx.conn.execute(
                f"INSERT OR REPLACE INTO canaries ({', '.join(state)}) VALUES (?,?,?,?,?,?)",  # noqa: S608
                tuple(state.values()),
            )
            reason = f"{version} serves {share:g}% of new sessions"
            ctx.record_event(CANARY_EVENT, scenario, {"action": "started", "canary": state, "reason": reason})
            return state

        return await self._writer.submit(write)

    async def end(self, scenario: str, action: str, reason: str, release_id: str | None = None) -> CanaryState | None:
        """End the scenario's canary (only if it is `release_id`'s, when given); the one ended, or None."""

        def write(ctx: WriteContext) -> CanaryState | None:
            row = ctx.conn.execute(
                f"SELECT {_COLUMNS} FROM canaries WHERE scenario = ?",  # noqa: S608
                (scenario,),
            ).fetchone()
            if row is None or (release_id is not None and row["release_id"] != release_id):
                return None
            ctx.conn.execute("DELETE FROM canaries WHERE scenario = ?", (scenario,))
            state = _state(row)
            ctx.record_event(CANARY_EVENT, scenario, {"action": action, "canary": state, "reason": reason})
            return state

        return await self._writer.submit(write)

    async def get(self, scenario: str) -> CanaryState | None:
        def read(conn: sqlite3.Connection) -> CanaryState | None:
            row = conn.execute(f"SELECT {_COLUMNS} FROM canaries WHERE scenario = ?", (scenario,)).fetchone()  # noqa: S608
            return _state(row) if row else None

        return await self._reader.run(read)
