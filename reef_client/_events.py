"""The daemon's committed events (`GET /reef/events`) as the client yields them, read from parsed SSE frames.

The names and payloads are the contract's (EventName, RecordEvent, ReportEvent, RequestEvent, ...)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast

from httpx_sse import ServerSentEvent

from reef_contract import EVENT_NAMES, EventName, RecordRow, ReportEvent, RequestState


@dataclass(frozen=True)
class Event:
    """One committed event: `record`, `report`, `scenario`, `step`, `release`, `request` or `canary`.

    `data` is the whole JSON payload: the contract's payload of that event with `type`, `sequence` and `scenario`.
    """

    type: EventName
    sequence: int
    scenario: str | None
    data: dict[str, Any]

    @property
    def record(self) -> RecordRow | None:
        """The record row a `record`, `report` or `request` event announces (None for a request's progress)."""
        row: RecordRow | None = self.data.get("record")
        return row if isinstance(row, dict) else None

    @property
    def report(self) -> ReportEvent | None:
        """What a `report` event scored: its `references` and `score`; None for other events."""
        return cast(ReportEvent, self.data) if self.type == "report" else None

    @property
    def request(self) -> RequestState | None:
        """Where the change request of a `request` event stands; None for other events."""
        state = self.data.get("request") if self.type == "request" else None
        return cast(RequestState, state) if isinstance(state, dict) else None


def event_of(sse: ServerSentEvent) -> Event | None:
    """The event a frame carries; None for a frame without a sequence id or a JSON object (a keep-alive, say), or
    of a kind this client does not know (a newer daemon's)."""
    if not sse.data or not sse.id.isdigit() or sse.event not in EVENT_NAMES:
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
