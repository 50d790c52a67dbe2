"""How stored rows look to clients: the summary row of `GET /reef/records`, the full record of `/reef/records/{id}`."""

from __future__ import annotations

import json
from typing import Any

SUMMARY_COLUMNS = (
    "sequence, id, scenario, type, created_at, route, model, status, complete, duration_ms,"
    " input_tokens, output_tokens, score, release"
)
DETAIL_COLUMNS = SUMMARY_COLUMNS + ", ttft_ms, overhead_ms, request, response, error, tags, tokens, body, answer"


def summary_row(values: tuple[Any, ...]) -> dict[str, Any]:
    (sequence, record_id, scenario, type_, created_at, route, model, status, complete, duration_ms,
     input_tokens, output_tokens, score, release) = values[:14]  # fmt: skip
    return {
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


def detail_row(values: tuple[Any, ...]) -> dict[str, Any]:
    row = summary_row(values)
    ttft_ms, overhead_ms, request, response, error, tags, tokens, body, answer = values[14:23]
    row["timings"] = {"ttft_ms": ttft_ms, "duration_ms": row["duration_ms"], "overhead_ms": overhead_ms}
    row["request"] = decode_body(request)
    row["response"] = decode_body(response)
    row["answer"] = json.loads(answer) if answer else None
    row["error"] = error
    row["tags"] = json.loads(tags) if tags else {}
    if tokens:
        row["tokens"] = json.loads(tokens)
    if body:
        row.update(json.loads(body))
    return row


def decode_body(raw: bytes | str | None) -> Any:
    """A stored body as JSON when it is JSON, else as text (an upstream's plain-text error, say)."""
    if raw is None:
        return None
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    try:
        return json.loads(text)
    except ValueError:
        return text
