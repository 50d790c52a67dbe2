"""OpenAI responses input items (messages, function calls and their outputs) as chat messages."""

from __future__ import annotations

from typing import Any

from reef_transcripts.chat import Message, append_message, assistant_message, text_of, tool_call

# The responses API's instruction role is chat's system role.
ROLES = {"developer": "system", "system": "system", "user": "user", "assistant": "assistant"}


def item_message(item: dict[str, Any]) -> Message | None:
    """One input or output item as a chat message; None for items chat has no place for (reasoning, searches)."""
    kind = item.get("type", "message")
    role = item.get("role")
    if kind == "message" and isinstance(role, str) and role in ROLES:
        role = ROLES[role]
        text = text_of(item.get("content"))
        return assistant_message(text, []) if role == "assistant" else {"role": role, "content": text}
    if kind == "function_call":
        return assistant_message("", [tool_call(item.get("call_id"), item.get("name"), item.get("arguments", ""))])
    if kind == "custom_tool_call":
        return assistant_message("", [tool_call(item.get("call_id"), item.get("name"), item.get("input", ""))])
    if kind in ("function_call_output", "custom_tool_call_output"):
        output = item.get("output")
        text = output if isinstance(output, str) else text_of(output.get("content") if isinstance(output, dict)
                                                               else output)  # fmt: skip
        return {"role": "tool", "tool_call_id": str(item.get("call_id", "")), "content": text}
    return None


def responses_request(request: dict[str, Any]) -> list[Message]:
    """A `/v1/responses` request's instructions and input."""
    messages: list[Message] = []
    if request.get("instructions"):
        messages.append({"role": "system", "content": text_of(request["instructions"])})
    items = request.get("input")
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
        return messages
    for item in items if isinstance(items, list) else []:
        message = item_message(item) if isinstance(item, dict) else None
        if message is not None:
            append_message(messages, message)
    return messages
