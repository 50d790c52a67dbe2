"""How stored rows look to clients: the summary row of `GET /reef/records`, the full record of `/reef/records/{id}`,
and the event a record publishes when stored (and is replayed as)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from reef_daemon.contract import RECORD_EVENTS, EventData, RecordContent, RecordRow, StoredRecord
from reef_daemon.store.writer import Event

SUMMARY_COLUMNS = (
    "sequence, id, scenario, type, created_at, route, model, status, complete, duration_ms,"
    " input_tokens, output_tokens, score, release, asked, answered"
)
DETAIL_COLUMNS = SUMMARY_COLUMNS + ", ttft_ms, overhead_ms, request, response, error, tags, tokens, body, answer"


def summary_row(values: tuple[Any, ...]) -> RecordRow:
    """The row of SUMMARY_COLUMNS' values (extra values after them are ignored)."""
    (sequence, record_id, scenario, type_, created_at, route, model, status, complete, duration_ms,
     input_tokens, output_tokens, score, release, asked, answered) = values[:16]  # fmt: skip
    row: RecordRow = {
        "sequence": sequence,
        "id": record_id,
        "scenario": scenario,
        "type": type_,
        "created_at": created_at,
        "route": route,
        "model": model,
        "status": status,
        "complete": None if complete is None else bool(complete),
        "duration_ms": duration_ms,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        "score": score,
        "release": release,
    }
    if asked is not None or answered is not None:
        row["preview"] = {"asked": asked, "answered": answered}
    return row


def detail_row(values: tuple[Any, ...]) -> StoredRecord:
    """The record in full, from DETAIL_COLUMNS' values; a client record's content is merged in."""
    summary = summary_row(values)
    ttft_ms, overhead_ms, request, response, error, tags, tokens, body, answer = values[16:25]
    content: RecordContent = {}
    if tokens:
        content["tokens"] = json.loads(tokens)
    if body:
        content.update(json.loads(body))
    return {
        **summary,
        "timings": {"ttft_ms": ttft_ms, "duration_ms": summary["duration_ms"], "overhead_ms": overhead_ms},
        "request": decode_body(request),
        "response": decode_body(response),
        "answer": json.loads(answer) if answer else None,
        "error": error,
        "tags": json.loads(tags) if tags else {},
        **content,
    }


def record_event(row: RecordRow, content: Mapping[str, Any]) -> Event:
    """The event a stored record publishes, named by RECORD_EVENTS: its row, and for a report what it scored; a
    change request is announced as filed (queued), as its progress events will announce it moving on."""
    data: EventData
    if row["type"] == "report":
        data = {"record": row, "references": content.get("references", []), "score": content.get("score")}
    elif row["type"] == "request":
        data = {"request": {"id": row["id"], "state": "queued", "activity": None}, "record": row}
    else:
        data = {"record": row}
    return Event(RECORD_EVENTS[row["type"]], row["sequence"], row["scenario"], data)


def decode_body(raw: bytes | str | None) -> Any:
    """A stored body as JSON when it is JSON, else as text (an upstream's plain-text error, say)."""
    if raw is None:
        return None
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    try:
        return json.loads(text)
    except ValueError:
        return text
