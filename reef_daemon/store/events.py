"""Replaying events from the database, for a client that resumes `GET /reef/events` with `Last-Event-ID`.

A record's event is the record itself (rows.record_event); other events (scenario, step, release, a request's
progress, canary) are kept in the `events` table. Both share one sequence, so a merge by sequence is the full history.
"""

from __future__ import annotations

import json

from reef_daemon.store.engines.engine import Connection
from reef_daemon.store.engines.reader import Reader
from reef_daemon.store.engines.writer import Event
from reef_daemon.store.rows import SUMMARY_COLUMNS, record_event, summary_row

# Records and the events table merged by sequence in one query. An event's row has its data (never NULL) and NULL
# for each record column but the three both tables have; a record's row has NULL data.
_SHARED_COLUMNS = ("sequence", "scenario", "type")
_EVENT_COLUMNS = ", ".join(
    name if name in _SHARED_COLUMNS else f"NULL AS {name}"
    for name in (column.strip() for column in SUMMARY_COLUMNS.split(","))
)
_READ_AFTER = (
    f"SELECT {SUMMARY_COLUMNS}, body, NULL AS event_data FROM records WHERE sequence > ? {{scope}}"  # noqa: S608
    f" UNION ALL SELECT {_EVENT_COLUMNS}, NULL AS body, data AS event_data FROM events WHERE sequence > ? {{scope}}"
    " ORDER BY sequence LIMIT ?"
)


class EventLog:
    def __init__(self, reader: Reader) -> None:
        self._reader = reader

    async def after(self, sequence: int, scenario: str | None, limit: int = 1000) -> list[Event]:
        return await self._reader.run(lambda conn: self.read_after(conn, sequence, scenario, limit))

    @staticmethod
    def read_after(conn: Connection, sequence: int, scenario: str | None, limit: int) -> list[Event]:
        """Up to `limit` events after `sequence`, in order (of one scenario, or of all when None): one query, as
        a follower of a shared store runs it after every commit."""
        scope, params = ("AND scenario = ?", (scenario,)) if scenario else ("", ())
        events: list[Event] = []
        for stored in conn.execute(_READ_AFTER.format(scope=scope), (sequence, *params, sequence, *params, limit)):
            if stored["event_data"] is None:
                events.append(record_event(summary_row(stored), json.loads(stored["body"] or "{}")))
            else:
                data = json.loads(stored["event_data"])
                events.append(Event(stored["type"], stored["sequence"], stored["scenario"], data))
        return events
