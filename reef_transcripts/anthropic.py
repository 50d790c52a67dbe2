"""Anthropic messages (content blocks: text, thinking, tool_use, tool_result) as chat messages."""

from __future__ import annotations

from typing import Any

from reef_transcripts.chat import Message, append_message, assistant_message, text_of, tool_call


def block_messages(role: str, content: Any) -> list[Message]:
    """One Anthropic message as chat messages: tool results become `tool` messages, tool uses tool calls;
    thinking is left out (chat has no place for it)."""
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    blocks = [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []
    out: list[Message] = []
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            calls.append(tool_call(block.get("id"), block.get("name"), block.get("input", {})))
        elif kind == "tool_result":
            out.append({"role": "tool", "tool_call_id": str(block.get("tool_use_id", "")),
                        "content": text_of(block.get("content"))})  # fmt: skip
    if role == "assistant":
        if texts or calls:
            out.append(assistant_message("\n".join(texts), calls))
    elif texts:
        out.append({"role": role, "content": "\n".join(texts)})
    return out


def messages_request(request: dict[str, Any]) -> list[Message]:
    """A `/v1/messages` request's system prompt and messages."""
    messages: list[Message] = []
    system = request.get("system")
    if system:
        messages.append({"role": "system", "content": text_of(system)})
    found = request.get("messages")
    for message in found if isinstance(found, list) else []:
        role = message.get("role", "user") if isinstance(message, dict) else None
        if isinstance(role, str):  # a message whose role is not text has no place in a chat conversation
            for converted in block_messages(role, message.get("content")):
                append_message(messages, converted)
    return messages
