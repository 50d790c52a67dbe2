"""Reading the daemon's `GET /reef/events` server-sent events into `Event` values."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Event:
    """One committed event: `record`, `report`, `scenario`, `step`, `release` or `request`.

    `data` is the whole JSON payload; for `record` and `report` events `data["record"]` is the record row.
    """

    type: str
    sequence: int
    scenario: str | None
    data: dict[str, Any]

    @property
    def record(self) -> dict[str, Any] | None:
        """The record row a `record` or `report` event announces, else None."""
        row = self.data.get("record")
        return row if isinstance(row, dict) else None


def parse_events(lines: Iterable[str]) -> Iterator[Event]:
    """Events from SSE lines. Comments (keep-alives) are skipped; frames without an id or JSON data too."""
    kind = ""
    ident = ""
    data: list[str] = []
    for line in lines:
        if line == "":
            event = _build(kind, ident, data)
            if event is not None:
                yield event
            kind, ident, data = "", "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            kind = value
        elif field == "id":
            ident = value
        elif field == "data":
            data.append(value)


def _build(kind: str, ident: str, data: list[str]) -> Event | None:
    if not data or not ident.isdigit():
        return None
    try:
        payload = json.loads("\n".join(data))
    except ValueError:
        return None
    if not isinstance(payload, dict):
        return None
    scenario = payload.get("scenario")
    return Event(
        type=kind or str(payload.get("type", "message")),
        sequence=int(ident),
        scenario=scenario if isinstance(scenario, str) else None,
        data=payload,
    )
