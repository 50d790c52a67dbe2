"""Assembling a recorded SSE stream into the answer a non-streaming call would have returned, so `reef show`
renders both the same way. Works on incomplete streams too: whatever arrived is assembled."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def assemble(route: str, raw: str) -> dict[str, Any]:
    """The answer in the non-streaming shape of `route` (chat completion, message or response)."""
    payloads = list(_payloads(raw))
    if route.endswith("/chat/completions"):
        return _chat(payloads)
    if route.endswith("/messages"):
        return _messages(payloads)
    if route.endswith("/responses"):
        return _responses(payloads)
    return {}


def _payloads(raw: str) -> Iterator[dict[str, Any]]:
    for frame in raw.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in frame.split("\n") if line.startswith("data:"))
        if not data or data == "[DONE]":
            continue
        try:
            payload = json.loads(data)
        except ValueError:
            continue
        if isinstance(payload, dict):
            yield payload


def _chat(payloads: list[dict[str, Any]]) -> dict[str, Any]:
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    answer: dict[str, Any] = {}
    for payload in payloads:
        answer.update({key: payload[key] for key in ("id", "model", "usage") if payload.get(key)})
        for choice in payload.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                content.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(call.get("index", 0), {"id": None, "function": {"name": "", "arguments": ""}})
                slot["id"] = call.get("id") or slot["id"]
                function = call.get("function") or {}
                slot["function"]["name"] += function.get("name") or ""
                slot["function"]["arguments"] += function.get("arguments") or ""
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
    if calls:
        message["tool_calls"] = [calls[index] for index in sorted(calls)]
    answer["choices"] = [{"index": 0, "message": message}]
    return answer


def _messages(payloads: list[dict[str, Any]]) -> dict[str, Any]:
    answer: dict[str, Any] = {"role": "assistant"}
    blocks: dict[int, dict[str, Any]] = {}
    partial_json: dict[int, str] = {}
    for payload in payloads:
        kind = payload.get("type")
        index = payload.get("index", 0)
        if kind == "message_start":
            answer.update({k: v for k, v in (payload.get("message") or {}).items() if k != "content"})
        elif kind == "content_block_start":
            blocks[index] = dict(payload.get("content_block") or {})
        elif kind == "content_block_delta":
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            delta = payload.get("delta") or {}
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + str(delta.get("text", ""))
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
            elif delta.get("type") == "input_json_delta":
                partial_json[index] = partial_json.get(index, "") + str(delta.get("partial_json", ""))
        elif kind == "message_delta":
            answer.update(payload.get("delta") or {})
    for index, text in partial_json.items():
        try:
            blocks[index]["input"] = json.loads(text)
        except ValueError:
            blocks[index]["input"] = text
    answer["content"] = [blocks[index] for index in sorted(blocks)]
    return answer


def _responses(payloads: list[dict[str, Any]]) -> dict[str, Any]:
    items: dict[int, dict[str, Any]] = {}
    text: dict[int, str] = {}
    for payload in payloads:
        kind = payload.get("type")
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            response = payload.get("response")
            if isinstance(response, dict) and response.get("output"):
                return response
        index = payload.get("output_index", 0)
        if kind in ("response.output_item.added", "response.output_item.done"):
            items[index] = dict(payload.get("item") or {})
        elif kind == "response.output_text.delta":
            text[index] = text.get(index, "") + str(payload.get("delta", ""))
    for index, written in text.items():
        item = items.setdefault(index, {"type": "message", "role": "assistant"})
        if not item.get("content"):
            item["content"] = [{"type": "output_text", "text": written}]
    return {"output": [items[index] for index in sorted(items)]}
