"""Replaying events from the database, for a client that resumes `GET /reef/events` with `Last-Event-ID`.

A record's event is the record itself (rows.record_event); other events (scenario, step, release, a request's
progress, canary) are kept in the `events` table. Both share one sequence, so a merge by sequence is the full history.
"""

from __future__ import annotations

import json

from reef_daemon.store.engine import Connection
from reef_daemon.store.reader import Reader
from reef_daemon.store.rows import SUMMARY_COLUMNS, record_event, summary_row
from reef_daemon.store.writer import Event


class EventLog:
    def __init__(self, reader: Reader) -> None:
        self._reader = reader

    async def after(self, sequence: int, scenario: str | None, limit: int = 1000) -> list[Event]:
        return await self._reader.run(lambda conn: self.read_after(conn, sequence, scenario, limit))

    @staticmethod
    def read_after(conn: Connection, sequence: int, scenario: str | None, limit: int) -> list[Event]:
        """Up to `limit` events after `sequence`, in order (of one scenario, or of all when None)."""
        scope, params = ("AND scenario = ?", (scenario,)) if scenario else ("", ())
        events: list[Event] = []
        for stored in conn.execute(
            f"SELECT {SUMMARY_COLUMNS}, body FROM records WHERE sequence > ? {scope}"  # noqa: S608
            " ORDER BY sequence LIMIT ?",
            (sequence, *params, limit),
        ):
            events.append(record_event(summary_row(stored), json.loads(stored["body"] or "{}")))
        for stored in conn.execute(
            f"SELECT sequence, type, scenario, data FROM events WHERE sequence > ? {scope}"  # noqa: S608
            " ORDER BY sequence LIMIT ?",
            (sequence, *params, limit),
        ):
            events.append(Event(stored["type"], stored["sequence"], stored["scenario"], json.loads(stored["data"])))
        events.sort(key=lambda e: e.sequence)
        return events[:limit]
