"""A conversation's turns as the next-turn judge reads them, from a stored request of any inference API, and the
rule that finds what the user said after an earlier answer.

A later request of a session continues an earlier record when its turns start with the earlier request's turns,
then an assistant turn (the earlier answer), then more. What follows is the user's next message only when a person
wrote it: a tool's result is the agent's own progress, and text that is nothing but the agent's markup
(`<system-reminder>…</system-reminder>`, `<environment_context>…`) is the agent speaking for itself. Neither is
taken for the user.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from reef_daemon.contract import CHAT_ROUTE, MESSAGES_ROUTE, RESPONSES_ROUTE

Role = Literal["system", "user", "assistant", "tool"]
# Whole blocks of an agent's own markup: a tag, its content, its closing tag.
_AGENT_MARKUP = re.compile(r"<([A-Za-z][\w-]*)(?:\s[^>]*)?>.*?</\1>", re.DOTALL)


@dataclass(frozen=True)
class Turn:
    role: Role
    text: str

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps([self.role, self.text]).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class NextTurn:
    """What followed an earlier answer: `user` (a person's message, in `text`), `tool` (a tool's result: the
    agent went on by itself) or `agent` (the agent's own follow-up, not a person's words)."""

    kind: Literal["user", "tool", "agent"]
    text: str = ""


def request_turns(route: str, request: Any) -> list[Turn]:
    """The turns of a stored request (the JSON body the client sent); empty for a body that is not one."""
    if not isinstance(request, dict):
        return []
    if route == RESPONSES_ROUTE:
        return _responses_turns(request.get("input"))
    messages = request.get("messages")
    if route not in (CHAT_ROUTE, MESSAGES_ROUTE) or not isinstance(messages, list):
        return []
    turns = []
    for message in messages:
        if isinstance(message, dict):
            turns.append(_message_turn(message))
    return turns


def answer_text(answer: Any) -> str:
    """The text of a stored answer (`StoredRecord.answer`), its tool calls written as `→ name(arguments)`."""
    if not isinstance(answer, dict):
        return ""
    lines = []
    for part in answer.get("parts") or []:
        if part.get("type") == "text":
            lines.append(str(part.get("text") or ""))
        elif part.get("type") == "tool_call":
            lines.append(f"→ {part.get('name')}({str(part.get('arguments') or '')[:200]})")
    return "\n".join(line for line in lines if line)


def continuation(earlier: Sequence[str], later: list[Turn]) -> NextTurn | None:
    """What followed the earlier request's answer in `later`, when `later` continues the earlier request (whose
    turns' fingerprints are `earlier`); else None."""
    size = len(earlier)
    if size == 0 or len(later) < size + 2:
        return None
    if [t.fingerprint for t in later[:size]] != list(earlier):
        return None
    if later[size].role != "assistant":
        return None
    following = later[size + 1 :]
    if any(turn.role == "tool" for turn in following):
        return NextTurn("tool")
    said = [_AGENT_MARKUP.sub("", turn.text).strip() for turn in following if turn.role == "user"]
    said = [text for text in said if text]
    if not said:
        return NextTurn("agent")
    return NextTurn("user", "\n".join(said))


def _message_turn(message: dict[str, Any]) -> Turn:
    role = str(message.get("role") or "user")
    content = message.get("content")
    if role == "tool" or role == "function":
        return Turn("tool", _text_of(content))
    if isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content
    ):
        return Turn("tool", _text_of(content))
    text = _text_of(content)
    if role == "assistant":
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls:
            names = [str((call.get("function") or {}).get("name")) for call in calls if isinstance(call, dict)]
            text = "\n".join([text, *(f"→ {name}" for name in names)]).strip()
        return Turn("assistant", text)
    if role in ("system", "developer"):
        return Turn("system", text)
    return Turn("user", text)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = []
    for block in content:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, dict):
            if isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif block.get("type") == "tool_use":
                texts.append(f"→ {block.get('name')}")
            elif block.get("type") == "tool_result":
                texts.append(_text_of(block.get("content")))
    return "\n".join(texts)


def _responses_turns(items: Any) -> list[Turn]:
    if isinstance(items, str):
        return [Turn("user", items)]
    if not isinstance(items, list):
        return []
    turns = []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind in ("function_call_output", "custom_tool_call_output"):
            turns.append(Turn("tool", str(item.get("output") or "")))
        elif kind in ("function_call", "custom_tool_call"):
            turns.append(Turn("assistant", f"→ {item.get('name')}"))
        elif kind == "message":
            turns.append(_message_turn(item))
    return turns
