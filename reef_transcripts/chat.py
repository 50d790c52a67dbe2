"""The OpenAI chat message shape every conversation is brought to, and the helpers that build it."""

from __future__ import annotations

import json
from typing import Any

Message = dict[str, Any]


def tool_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """A chat `tool_calls` entry; arguments given as an object are written as the JSON text chat carries."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return {
        "id": str(call_id) if call_id is not None else "",
        "type": "function",
        "function": {"name": str(name) if name is not None else "", "arguments": text},
    }


def assistant_message(text: str, tool_calls: list[dict[str, Any]]) -> Message:
    """An assistant turn: its text (None when it only calls tools) and its tool calls."""
    message: Message = {"role": "assistant", "content": text or (None if tool_calls else "")}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def text_of(content: Any) -> str:
    """The text of a message content: a string, or the text of its parts (`text`, `input_text`, `output_text`)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [str(part.get("text", "")) for part in content if isinstance(part, dict) and "text" in part]
        return "\n".join(texts)
    return ""


def append_message(messages: list[Message], message: Message) -> None:
    """Append, merging an assistant turn split over several entries (text, then each tool call) into one."""
    previous = messages[-1] if messages else None
    if previous is not None and previous["role"] == "assistant" and message["role"] == "assistant":
        texts = [text for text in (previous.get("content"), message.get("content")) if text]
        calls = [*previous.get("tool_calls", []), *message.get("tool_calls", [])]
        messages[-1] = assistant_message("\n".join(texts), calls)
        return
    messages.append(message)


def trim_to_last_answer(messages: list[Message]) -> list[Message]:
    """The conversation up to its last assistant turn (what came after it was never answered)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index]["role"] == "assistant":
            return messages[: index + 1]
    return []
