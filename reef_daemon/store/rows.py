"""How stored rows look to clients: the summary row of `GET /reef/records`, the full record of `/reef/records/{id}`,
and the event a record publishes when stored (and is replayed as).

Every store connection gives rows that are read by column name (`engine.Columns`), so a SELECT's
column list can change without its readers counting positions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from reef_contract import (
    RECORD_EVENTS,
    EventData,
    RecordContent,
    RecordRow,
    RecordType,
    StoredRecord,
    report_source,
)
from reef_daemon.records import ExchangeFacts
from reef_daemon.store.engines.engine import Columns
from reef_daemon.store.engines.writer import Event

SUMMARY_COLUMNS = (
    "sequence, id, scenario, type, created_at, route, model, status, complete, duration_ms,"
    " input_tokens, output_tokens, score, source, release, asked, answered"
)
DETAIL_COLUMNS = SUMMARY_COLUMNS + ", ttft_ms, overhead_ms, request, response, error, tags, tokens, body, answer"


def record_row(
    sequence: int, record_id: str, scenario: str, type_: RecordType, created_at: float, route: str | None,
    model: str | None, status: int | None, complete: int | None, duration_ms: float | None,
    input_tokens: int | None, output_tokens: int | None, score: float | None, source: str | None,
    release: str | None, asked: str | None, answered: str | None,
) -> RecordRow:  # fmt: skip
    """The row clients see, from the values of SUMMARY_COLUMNS (the writer calls this with what it just inserted)."""
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
        "source": report_source(source) if source else None,
        "release": release,
    }
    if asked is not None or answered is not None:
        row["preview"] = {"asked": asked, "answered": answered}
    return row


def summary_row(row: Columns) -> RecordRow:
    """The row clients see, from a stored row that has SUMMARY_COLUMNS (other columns are ignored)."""
    return record_row(
        row["sequence"], row["id"], row["scenario"], row["type"], row["created_at"], row["route"], row["model"],
        row["status"], row["complete"], row["duration_ms"], row["input_tokens"], row["output_tokens"], row["score"],
        row["source"], row["release"], row["asked"], row["answered"],
    )  # fmt: skip


def detail_row(row: Columns) -> StoredRecord:
    """The record in full, from a stored row that has DETAIL_COLUMNS; a client record's content is merged in."""
    summary = summary_row(row)
    content: RecordContent = {}
    if row["tokens"]:
        content["tokens"] = json.loads(row["tokens"])
    if row["body"]:
        content.update(json.loads(row["body"]))
    return {
        **summary,
        "timings": {
            "ttft_ms": row["ttft_ms"],
            "duration_ms": summary["duration_ms"],
            "overhead_ms": row["overhead_ms"],
        },
        "request": decode_body(row["request"]),
        "response": decode_body(row["response"]),
        "answer": json.loads(row["answer"]) if row["answer"] else None,
        "error": row["error"],
        "tags": json.loads(row["tags"]) if row["tags"] else {},
        **content,
    }


def record_event(row: RecordRow, content: Mapping[str, Any], facts: ExchangeFacts | None = None) -> Event:
    """The event a stored record publishes, named by RECORD_EVENTS: its row, and for a report what it scored; a
    change request is announced as filed (queued), as its progress events will announce it moving on. An exchange's
    `facts` ride along in this process."""
    data: EventData
    if row["type"] == "report":
        data = {"record": row, "references": content.get("references", []), "score": content.get("score")}
    elif row["type"] == "request":
        data = {"request": {"id": row["id"], "state": "queued", "activity": None}, "record": row}
    else:
        data = {"record": row}
    return Event(RECORD_EVENTS[row["type"]], row["sequence"], row["scenario"], data, facts)


def decode_body(raw: bytes | str | None) -> Any:
    """A stored body as JSON when it is JSON, else as text (an upstream's plain-text error, say)."""
    if raw is None:
        return None
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    try:
        return json.loads(text)
    except ValueError:
        return text
