"""The daemon's committed events (`GET /reef/events`) as the client yields them, read from parsed SSE frames."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from httpx_sse import ServerSentEvent

from reef_daemon.contract import RecordRow


@dataclass(frozen=True)
class Event:
    """One committed event: `record`, `report`, `scenario`, `step`, `release`, `request` or `canary`.

    `data` is the whole JSON payload; for `record` and `report` events `data["record"]` is the record row.
    """

    type: str
    sequence: int
    scenario: str | None
    data: dict[str, Any]

    @property
    def record(self) -> RecordRow | None:
        """The record row a `record`, `report` or `request` event announces, else None."""
        row: RecordRow | None = self.data.get("record")
        return row if isinstance(row, dict) else None


def event_of(sse: ServerSentEvent) -> Event | None:
    """The event a frame carries; None for a frame without a sequence id or a JSON object (a keep-alive, say)."""
    if not sse.data or not sse.id.isdigit():
        return None
    try:
        payload = json.loads(sse.data)
    except ValueError:
        return None
    if not isinstance(payload, dict):
        return None
    scenario = payload.get("scenario")
    return Event(
        type=sse.event,
        sequence=int(sse.id),
        scenario=scenario if isinstance(scenario, str) else None,
        data=payload,
    )
