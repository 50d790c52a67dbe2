"""What a record keeps besides raw bytes: the model, token usage, and for streams the assembled answer.

Runs on the store's writer thread, never on the event loop, so the proxy's hot path stays a byte relay.
"""

from __future__ import annotations

import json
from typing import Any

from reef_daemon.proxy.sse import CHAT_ROUTE, MESSAGES_ROUTE, RESPONSES_ROUTE, parse_frame, split_frames
from reef_daemon.store import InferenceDraft, InferenceSummary


def summarize(draft: InferenceDraft) -> InferenceSummary:
    model = draft.model
    if draft.stream:
        return _summarize_stream(draft, model)
    response = _object(draft.response)
    if isinstance(response.get("model"), str):
        model = response["model"]
    input_tokens, output_tokens = _usage(response.get("usage"))
    if draft.route.endswith("/count_tokens") and isinstance(response.get("input_tokens"), int):
        input_tokens = response["input_tokens"]
    return InferenceSummary(model, input_tokens, output_tokens, draft.response)


def _summarize_stream(draft: InferenceDraft, model: str | None) -> InferenceSummary:
    text_parts: list[str] = []
    tool_use = False
    input_tokens = output_tokens = None
    for frame in split_frames(draft.response):
        _event, data = parse_frame(frame)
        payload = _object(data.encode())
        if not payload:
            continue
        if isinstance(payload.get("model"), str):
            model = payload["model"]
        if draft.route == CHAT_ROUTE:
            for choice in payload.get("choices") or []:
                if not isinstance(choice, dict) or choice.get("index", 0) not in (0, None):
                    continue
                delta = choice.get("delta") or {}
                if isinstance(delta.get("content"), str):
                    text_parts.append(delta["content"])
                if delta.get("tool_calls"):
                    tool_use = True
            if payload.get("usage"):
                input_tokens, output_tokens = _usage(payload["usage"])
        elif draft.route == MESSAGES_ROUTE:
            kind = payload.get("type")
            if kind == "message_start":
                message = payload.get("message") or {}
                model = message.get("model", model)
                input_tokens, output_tokens = _usage(message.get("usage"))
            elif kind == "content_block_start" and (payload.get("content_block") or {}).get("type") == "tool_use":
                tool_use = True
            elif kind == "content_block_delta":
                delta = payload.get("delta") or {}
                if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
                    text_parts.append(delta["text"])
                elif delta.get("type") == "input_json_delta":
                    tool_use = True
            elif kind == "message_delta":
                _, output = _usage(payload.get("usage"))
                output_tokens = output if output is not None else output_tokens
        elif draft.route == RESPONSES_ROUTE:
            kind = payload.get("type")
            if kind == "response.output_text.delta" and isinstance(payload.get("delta"), str):
                text_parts.append(payload["delta"])
            elif kind == "response.output_item.added":
                if (payload.get("item") or {}).get("type") not in ("message", "reasoning", None):
                    tool_use = True
            elif kind in ("response.completed", "response.incomplete"):
                response = payload.get("response") or {}
                model = response.get("model", model)
                input_tokens, output_tokens = _usage(response.get("usage"))
    stored: dict[str, Any] = {
        "stream": True,
        "status": draft.status,
        "complete": draft.complete,
        "body": draft.response.decode("utf-8", errors="replace"),
    }
    if draft.complete and not tool_use:
        stored["message"] = {"role": "assistant", "content": "".join(text_parts)}
    if draft.error:
        stored["error"] = draft.error
    return InferenceSummary(
        model if isinstance(model, str) else None,
        input_tokens,
        output_tokens,
        json.dumps(stored, ensure_ascii=False).encode(),
    )


def _usage(usage: Any) -> tuple[int | None, int | None]:
    """Input and output token counts in whichever spelling the API uses."""
    if not isinstance(usage, dict):
        return None, None
    inputs = usage.get("input_tokens", usage.get("prompt_tokens"))
    outputs = usage.get("output_tokens", usage.get("completion_tokens"))
    return (inputs if isinstance(inputs, int) else None, outputs if isinstance(outputs, int) else None)


def _object(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
