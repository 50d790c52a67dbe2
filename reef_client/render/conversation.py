"""The messages of an exchange in one shape, whichever API carried them (chat completions, messages, responses).

A conversation is a list of turns; a turn has a role and parts: text, a tool call, or a tool result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from reef_contract import Answer

PartKind = Literal["text", "tool_call", "tool_result", "thinking"]


@dataclass(frozen=True)
class Part:
    """A piece of a turn: text (markdown), a tool call, a tool result, or thinking."""

    kind: PartKind
    text: str
    name: str | None = None  # the tool's name for calls, the call id for results


@dataclass
class Turn:
    """One message of the conversation: who spoke, and what."""

    role: str
    parts: list[Part] = field(default_factory=list)


def request_turns(route: str, request: Any) -> list[Turn]:
    """The conversation a request sent: system prompt, then each message."""
    if not isinstance(request, dict):
        return [Turn("request", [Part("text", _dump(request))])] if request else []
    turns: list[Turn] = []
    if route.endswith("/responses"):
        if request.get("instructions"):
            turns.append(Turn("system", [Part("text", str(request["instructions"]))]))
        items = request.get("input")
        if isinstance(items, str):
            return [*turns, Turn("user", [Part("text", items)])]
        return turns + _response_items(items if isinstance(items, list) else [])
    if request.get("system"):
        turns.append(Turn("system", _blocks(request["system"])))
    for message in request.get("messages") or []:
        if isinstance(message, dict):
            turns.append(_message(message))
    return turns


def answer_turns(answer: Answer) -> list[Turn]:
    """The assistant's answer as the daemon assembled it when it recorded the exchange, streamed or not."""
    parts: list[Part] = []
    for part in answer["parts"]:
        if part["type"] == "tool_call":
            parts.append(Part("tool_call", _arguments(part["arguments"]), part["name"]))
        elif part["type"] == "thinking":
            parts.append(Part("thinking", part["text"] or "(reasoning)"))
        elif part["type"] == "text":
            parts.append(Part("text", part["text"]))
        else:
            parts.append(Part("text", f"[{part['kind']}]"))
    return [Turn("assistant", parts)]


def body_turns(body: Any) -> list[Turn]:
    """A response with no assistant message in it (a token count, a plain-text body), shown as it is."""
    return [Turn("answer", [Part("text", _dump(body))])] if body else []


def tool_names(request: Any) -> list[str]:
    """The names of the tools a request offered the model."""
    names = []
    for tool in (request.get("tools") if isinstance(request, dict) else None) or []:
        if isinstance(tool, dict):
            name = tool.get("name") or (tool.get("function") or {}).get("name") or tool.get("type")
            if name:
                names.append(str(name))
    return names


def _message(message: dict[str, Any]) -> Turn:
    """A chat-completions or Anthropic message."""
    role = str(message.get("role", "?"))
    if role == "tool":
        return Turn("tool", [Part("tool_result", _text(message.get("content")), message.get("tool_call_id"))])
    turn = Turn(role, _blocks(message.get("content")))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        turn.parts.append(Part("tool_call", _arguments(function.get("arguments")), function.get("name")))
    return turn


def _blocks(content: Any) -> list[Part]:
    """Content as a string or a list of typed blocks (text, tool_use, tool_result, thinking, images)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [Part("text", content)] if content else []
    parts: list[Part] = []
    for block in content if isinstance(content, list) else [content]:
        if not isinstance(block, dict):
            parts.append(Part("text", _dump(block)))
            continue
        kind = block.get("type")
        if kind in ("text", "input_text", "output_text"):
            parts.append(Part("text", str(block.get("text", ""))))
        elif kind == "tool_use":
            parts.append(Part("tool_call", _arguments(block.get("input")), block.get("name")))
        elif kind == "tool_result":
            parts.append(Part("tool_result", _text(block.get("content")), block.get("tool_use_id")))
        elif kind in ("thinking", "reasoning"):
            parts.append(Part("thinking", str(block.get("thinking") or block.get("text") or "")))
        else:
            parts.append(Part("text", f"[{kind}]"))
    return parts


def _response_items(items: list[Any]) -> list[Turn]:
    """Responses-API input or output items: messages, function calls and their outputs, reasoning."""
    turns: list[Turn] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            turns.append(Turn(str(item.get("role", "assistant")), _blocks(item.get("content"))))
        elif kind == "function_call":
            turns.append(Turn("assistant", [Part("tool_call", _arguments(item.get("arguments")), item.get("name"))]))
        elif kind == "function_call_output":
            turns.append(Turn("tool", [Part("tool_result", _text(item.get("output")), item.get("call_id"))]))
        elif kind == "reasoning":
            summary = " ".join(str(s.get("text", "")) for s in item.get("summary") or [] if isinstance(s, dict))
            turns.append(Turn("assistant", [Part("thinking", summary or "(reasoning)")]))
        else:
            turns.append(Turn("assistant", [Part("text", f"[{kind}]")]))
    return turns


def _text(content: Any) -> str:
    """A tool result's content as text: a string, or the text of its blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.text for part in _blocks(content))
    return _dump(content)


def _arguments(arguments: Any) -> str:
    """Tool-call arguments pretty-printed as JSON (they arrive as a JSON string or an object)."""
    if not isinstance(arguments, str):
        return _dump(arguments)
    try:
        return _dump(json.loads(arguments))
    except ValueError:
        return arguments


def _dump(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)
