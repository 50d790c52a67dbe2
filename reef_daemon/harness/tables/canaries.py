"""Canaries: per scenario, at most one release served to a share of new sessions beside the served one. Kept in
the database, so a canary survives a restart; starting and ending one records a `canary` event that says why (a
canary replaced by another, or whose served release a new step replaced, ends too, with its own event)."""

from __future__ import annotations

import time

from reef_contract import CANARY_EVENT, CanaryState
from reef_daemon.store.engines.engine import Columns, Connection
from reef_daemon.store.engines.reader import Reader
from reef_daemon.store.engines.writer import GroupCommitWriter, WriteContext

_COLUMNS = "scenario, release_id, version, share, served_release_id, started_at"


def _state(row: Columns) -> CanaryState:
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
        """Start the scenario's canary; one already running ends, replaced."""

        def write(ctx: WriteContext) -> CanaryState:
            end_canary(ctx, scenario, "ended", f"replaced by a canary of {version}")
            state: CanaryState = {
                "scenario": scenario,
                "release_id": release_id,
                "version": version,
                "share": share,
                "served_release_id": served,
                "started_at": time.time(),
            }
            replaced = ", ".join(f"{column} = excluded.{column}" for column in state if column != "scenario")
            ctx.conn.execute(
                f"INSERT INTO canaries ({', '.join(state)}) VALUES (?,?,?,?,?,?)"  # noqa: S608
                f" ON CONFLICT (scenario) DO UPDATE SET {replaced}",
                tuple(state.values()),
            )
            reason = f"{version} serves {share:g}% of new sessions"
            ctx.record_event(CANARY_EVENT, scenario, {"action": "started", "canary": state, "reason": reason})
            return state

        return await self._writer.submit(write)

    async def end(self, scenario: str, action: str, reason: str, release_id: str | None = None) -> CanaryState | None:
        """End the scenario's canary (only if it is `release_id`'s, when given); the one ended, or None."""
        return await self._writer.submit(lambda ctx: end_canary(ctx, scenario, action, reason, release_id))

    async def get(self, scenario: str) -> CanaryState | None:
        def read(conn: Connection) -> CanaryState | None:
            row = conn.execute(f"SELECT {_COLUMNS} FROM canaries WHERE scenario = ?", (scenario,)).fetchone()  # noqa: S608
            return _state(row) if row else None

        return await self._reader.run(read)


def end_canary(
    ctx: WriteContext, scenario: str, action: str, reason: str, release_id: str | None = None
) -> CanaryState | None:
    """End the scenario's canary in the caller's transaction (only if it is `release_id`'s, when given), recording
    the `canary` event that says why; the one ended, or None."""
    row = ctx.conn.execute(f"SELECT {_COLUMNS} FROM canaries WHERE scenario = ?", (scenario,)).fetchone()  # noqa: S608
    if row is None or (release_id is not None and row["release_id"] != release_id):
        return None
    ctx.conn.execute("DELETE FROM canaries WHERE scenario = ?", (scenario,))
    state = _state(row)
    ctx.record_event(CANARY_EVENT, scenario, {"action": action, "canary": state, "reason": reason})
    return state
