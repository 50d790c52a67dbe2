"""The scenario's most recent low-scored conversations, rendered readably for the agent proposer's context/ folder:
each message by role, then the recorded answer (text and tool calls)."""

from __future__ import annotations

import json
from typing import Any

from reef_contract import low_score_below
from reef_daemon.recipe_api import RecordQuery, StoreView

SHOWN = 3  # conversations
SCANNED = 200  # newest inference records looked at
TEXT_LIMIT = 4000  # characters of one message


async def low_scored(store: StoreView, scenario: str) -> list[str]:
    """Up to SHOWN of the scenario's newest inference records that scored low (contract.low_score_below), as text."""
    below = low_score_below(store.score_scale)
    page = await store.records.list(RecordQuery(scenario=scenario, type="inference", limit=SCANNED))
    low = [row for row in page["records"] if row["score"] is not None and row["score"] < below][:SHOWN]
    shown = []
    for row in low:
        record: Any = await store.records.get(row["id"])
        shown.append(render(record))
    return shown


def render(record: dict[str, Any]) -> str:
    """One conversation: score, the request's messages, and the answer."""
    lines = [f"score: {record.get('score')}"]
    request = record.get("request")
    messages = request.get("messages", request.get("input", [])) if isinstance(request, dict) else []
    if isinstance(request, dict) and isinstance(request.get("system"), str):
        lines.append(f"[system]\n{_short(request['system'])}")
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict):
            lines.append(f"[{message.get('role', message.get('type', '?'))}]\n{_short(_content(message))}")
    answer = record.get("answer") or {}
    for part in answer.get("parts", []):
        if part.get("type") == "text":
            lines.append(f"[answer]\n{_short(part['text'])}")
        elif part.get("type") == "tool_call":
            lines.append(f"[answer: tool call {part.get('name')}]\n{_short(part.get('arguments', ''))}")
    return "\n".join(lines)


def _content(message: dict[str, Any]) -> str:
    content = message.get("content", message.get("output", ""))
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", "")) if isinstance(part, dict) and "text" in part else json.dumps(part)
            for part in content
        )
    return json.dumps(content)


def _short(text: str) -> str:
    return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT] + " …"
