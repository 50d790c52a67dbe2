"""An imported conversation checked and turned into what the store keeps: a chat exchange (the conversation before
the last answer as the request, the last answer as the response), tagged as imported, with an id made from its
content so the same conversation imported twice into one scenario is one record; and a report when it came with a
score (on the deployment's scale, like any report). Content is text: a list of text parts is taken as its text, any
other part (an image) is refused rather than dropped."""

from __future__ import annotations

import hashlib
import json
import math
import time
from typing import Any

from reef_contract import (
    CHAT_ROUTE,
    IMPORTED_TAG,
    SESSION_HEADER,
    TAG_HEADER_PREFIX,
    ImportConversation,
    import_part_problem,
    off_the_scale,
    score_problem,
)
from reef_daemon.records import ClientRecordDraft, InferenceDraft
from reef_daemon.reports import content_hash
from reef_daemon.store.imports import ImportDraft

ROLES = ("system", "developer", "user", "assistant", "tool")
FIELDS = ("messages", "format", "model", "tools", "created_at", "duration_ms", "session", "score", "feedback")
SESSION_TAG = SESSION_HEADER.removeprefix(TAG_HEADER_PREFIX)
# Later than this is a timestamp in milliseconds or nonsense (the year 5138).
MAX_EPOCH_S = 1e11


class Refused(ValueError):
    """A conversation the store will not take; the message says why, for the person importing."""


def checked(value: Any, score_scale: tuple[float, float] = (0.0, 1.0)) -> ImportConversation:
    """The conversation when its shape is one reef can store and its score is on `score_scale`; Refused with the
    first fault otherwise."""
    if not isinstance(value, dict):
        raise Refused(f"a conversation must be a JSON object, not {type(value).__name__}")
    unknown = sorted(set(value) - set(FIELDS))
    if unknown:
        raise Refused(f"unknown field {', '.join(unknown)}; a conversation has {', '.join(FIELDS)}")
    messages = value.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Refused("messages must be a non-empty list")
    for index, message in enumerate(messages):
        _check_message(index, message)
    if messages[-1]["role"] != "assistant":
        raise Refused("the last message must be the assistant's answer")
    for key, kinds in (("format", str), ("model", str), ("session", str), ("tools", list)):
        if key in value and not isinstance(value[key], kinds):
            raise Refused(f"{key} must be a {'list' if kinds is list else 'string'}")
    if "score" in value and (problem := score_problem(value["score"])) is not None:
        raise Refused(problem)
    for key in ("created_at", "duration_ms"):
        if key in value and not _finite(value[key]):
            raise Refused(f"{key} must be a finite number")
    if "created_at" in value and not 0 <= value["created_at"] < MAX_EPOCH_S:
        raise Refused("created_at must be seconds since the epoch")
    if "duration_ms" in value and value["duration_ms"] < 0:
        raise Refused("duration_ms must not be negative")
    if "score" in value and (off := off_the_scale(value["score"], *score_scale)) is not None:
        raise Refused(off)
    if "feedback" in value and not isinstance(value["feedback"], str | dict):
        raise Refused("feedback must be a string or an object")
    conversation: ImportConversation = value  # type: ignore[assignment] # its shape was checked above
    return conversation


def _check_message(index: int, message: Any) -> None:
    if not isinstance(message, dict) or message.get("role") not in ROLES:
        raise Refused(f"messages[{index}] must be an object with a role ({', '.join(ROLES)})")
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise Refused(f"messages[{index}].content must be text, a list of parts, or null")
    for number, part in enumerate(content if isinstance(content, list) else []):
        if (problem := import_part_problem(f"messages[{index}].content[{number}]", part)) is not None:
            raise Refused(problem)
    calls = message.get("tool_calls")
    if calls is not None and not (
        isinstance(calls, list) and all(isinstance(c, dict) and isinstance(c.get("function"), dict) for c in calls)
    ):
        raise Refused(f"messages[{index}].tool_calls must be a list of {{id, type, function}} objects")


def _finite(value: Any) -> bool:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an integer beyond a double's range
        return False


def draft_of(scenario: str, conversation: ImportConversation, attempt: int = 0) -> ImportDraft:
    """What the store keeps for a checked conversation; `attempt` > 0 gives the record another id, for when the
    first is held by the same conversation in an archived scenario."""
    messages = conversation["messages"]
    model = conversation.get("model")
    request: dict[str, Any] = {"model": model, "messages": messages[:-1]}
    if conversation.get("tools"):
        request["tools"] = conversation["tools"]
    answer = _as_text(messages[-1])
    record_id = _digest(["conversation", scenario, request, answer, *([attempt] if attempt else [])])
    created_at = conversation.get("created_at", time.time())
    response = {
        "id": f"imported-{record_id}",
        "object": "chat.completion",
        "created": int(created_at),
        "model": model,
        "choices": [{"index": 0, "message": answer, "finish_reason": "tool_calls" if answer.get("tool_calls")
                     else "stop"}],
    }  # fmt: skip
    tags = {IMPORTED_TAG: conversation.get("format", "openai")}
    if conversation.get("session"):
        tags[SESSION_TAG] = conversation["session"]
    record = InferenceDraft(
        id=record_id, scenario=scenario, route=CHAT_ROUTE, created_at=created_at, model=model,
        request=_json(request), status=200, response=_json(response), stream=False, complete=True, error=None,
        ttft_ms=None, duration_ms=conversation.get("duration_ms"), overhead_ms=None, tags=tags,
    )  # fmt: skip
    return ImportDraft(record, _report_of(scenario, record_id, created_at, conversation))


def _as_text(message: dict[str, Any]) -> dict[str, Any]:
    """The message with a list of text parts as one text, the shape every answer is read in."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    return {**message, "content": "\n".join(part["text"] for part in content)}


def _report_of(
    scenario: str, record_id: str, created_at: float, conversation: ImportConversation
) -> ClientRecordDraft | None:
    if "score" not in conversation and "feedback" not in conversation:
        return None
    content: dict[str, Any] = {"references": [record_id], "metadata": {IMPORTED_TAG: conversation.get("format")}}
    if "score" in conversation:
        content["score"] = float(conversation["score"])
    if "feedback" in conversation:
        content["feedback"] = conversation["feedback"]
    report_id = _digest(["report", content])
    digest = content_hash(scenario, content)
    return ClientRecordDraft(report_id, scenario, "report", created_at, content, digest, source="import")


def _digest(value: Any) -> str:
    """32 hex characters (a record id's shape) naming this content."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
