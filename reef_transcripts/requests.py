"""A recorded exchange (its request, as any of the three APIs, and its assembled answer) as chat messages."""

from __future__ import annotations

from typing import Any

from reef_transcripts.anthropic import messages_request
from reef_transcripts.chat import Message, append_message, assistant_message, text_of, tool_call
from reef_transcripts.responses import responses_request

CHAT_ROUTE = "/v1/chat/completions"
MESSAGES_ROUTE = "/v1/messages"
RESPONSES_ROUTE = "/v1/responses"


def request_messages(route: str | None, request: Any) -> list[Message]:
    """The prompt of an exchange as chat messages: the system prompt and every turn before the answer."""
    if not isinstance(request, dict):
        return []
    if route == MESSAGES_ROUTE:
        return messages_request(request)
    if route == RESPONSES_ROUTE:
        return responses_request(request)
    messages: list[Message] = []
    found = request.get("messages")
    for message in found if isinstance(found, list) else []:
        if isinstance(message, dict) and isinstance(message.get("role"), str):
            append_message(messages, _chat_message(message))
    return messages


def _chat_message(message: dict[str, Any]) -> Message:
    """A chat message with list content flattened to its text, so every line of a dataset has one shape."""
    role = "system" if message["role"] == "developer" else message["role"]
    out: Message = {"role": role, "content": text_of(message.get("content")) if message.get("content") else None}
    if role != "assistant" and out["content"] is None:
        out["content"] = ""
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:  # anything else (`true`, an object) is no call at all
        functions = [(call.get("id"), call.get("function")) for call in calls if isinstance(call, dict)]
        out["tool_calls"] = [tool_call(id_, fn.get("name"), fn.get("arguments", ""))
                             for id_, fn in functions if isinstance(fn, dict)]  # fmt: skip
    if message.get("tool_call_id") is not None:
        out["tool_call_id"] = str(message["tool_call_id"])
    return out


def request_tools(route: str | None, request: Any) -> list[dict[str, Any]]:
    """The tools offered in an exchange, as chat function tools."""
    tools = request.get("tools") if isinstance(request, dict) else None
    out: list[dict[str, Any]] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if route == CHAT_ROUTE and isinstance(tool.get("function"), dict):
            out.append({"type": "function", "function": tool["function"]})
        elif tool.get("name"):  # messages (input_schema) and responses (parameters) name tools at the top
            parameters = tool.get("input_schema", tool.get("parameters", {"type": "object"}))
            function = {"name": tool["name"], "description": tool.get("description", ""), "parameters": parameters}
            out.append({"type": "function", "function": function})
    return out


def answer_message(answer: Any) -> Message | None:
    """The assembled answer (`Answer` of the wire contract) as an assistant message; None without one."""
    if not isinstance(answer, dict):
        return None
    parts = [part for part in answer.get("parts") or [] if isinstance(part, dict)]
    text = "".join(str(part.get("text", "")) for part in parts if part.get("type") == "text")
    calls = [tool_call(part.get("id"), part.get("name"), part.get("arguments", ""))
             for part in parts if part.get("type") == "tool_call"]  # fmt: skip
    return assistant_message(text, calls)


__all__ = ["answer_message", "request_messages", "request_tools", "text_of"]
