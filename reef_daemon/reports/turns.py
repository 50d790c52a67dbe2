"""A conversation's turns as the next-turn judge reads them, from a stored request of any inference API, and the
rule that finds what the user said after an earlier answer.

A later request continues an earlier record when its turns hold the earlier request's turns, then the earlier
record's answer as the client sends it back (its text and tool calls, compared by fingerprint), then more. So each
kept answer is known by a key: a fingerprint chained over its conversation, the answer last
(`conversation_keys`), and a later request finds the answers it continues by the keys of its own assistant turns.
What follows an answer, up to the next assistant turn, is the user's next message only when a person wrote it: a
tool's result is the agent's own progress, and text that is nothing but the agent's markup
(`<system-reminder>…</system-reminder>`, `<environment_context>…`) is the agent speaking for itself. Neither is
taken for the user.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from reef_contract import CHAT_ROUTE, MESSAGES_ROUTE, RESPONSES_ROUTE
from reef_daemon.reports.agent_markup import without_agent_markup

Role = Literal["system", "user", "assistant", "tool"]
_SPACE = re.compile(r"\s")
KEY_BYTES = 16
WORDS_PIECE = 65536  # characters of text respaced at a time: a long text never holds the interpreter long


@dataclass(frozen=True)
class ToolCall:
    """A tool call of an assistant turn: its tool and its arguments (canonical JSON where they are JSON)."""

    name: str
    arguments: str


@dataclass(frozen=True)
class Turn:
    """One turn of a conversation; `failed` marks a tool's result its client sent as an error (the messages API's
    `is_error`), which the fingerprint leaves aside."""

    role: Role
    text: str
    calls: tuple[ToolCall, ...] = ()
    failed: bool = False

    @property
    def shown(self) -> str:
        """The turn as a judge reads it: its text, then `→ name` for each tool it called."""
        return "\n".join([self.text, *(f"→ {call.name}" for call in self.calls)]).strip()

    @property
    def fingerprint(self) -> bytes:
        """The turn's role, text and tool calls (their ids aside), hashed. An assistant's text is compared word by
        word, its spacing aside: a client may trim the answer it sends back."""
        text = hashlib.blake2b(digest_size=KEY_BYTES)
        for piece in _words(self.text) if self.role == "assistant" else (self.text,):
            text.update(piece.encode())
        fields = [self.role.encode(), text.digest()]
        fields += [part.encode() for call in self.calls for part in (call.name, call.arguments)]
        turn = hashlib.blake2b(digest_size=KEY_BYTES)
        for data in fields:  # each field after its length: no two turns hash the same fields
            turn.update(len(data).to_bytes(8, "big") + data)
        return turn.digest()


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


def answer_turn(answer: Any) -> Turn | None:
    """The assistant turn a stored answer (`StoredRecord.answer`) is when a client sends it back; None for none."""
    if not isinstance(answer, dict):
        return None
    texts, calls = [], []
    for part in answer.get("parts") or []:
        if part.get("type") == "text":
            texts.append(str(part.get("text") or ""))
        elif part.get("type") == "tool_call":
            calls.append(_tool_call(part.get("name"), part.get("arguments")))
    return Turn("assistant", "\n".join(texts), tuple(calls))


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


@dataclass(frozen=True)
class Reading:
    """A request as the next-turn judge reads it: its turns; the answers it carries that something follows, latest
    first, each as its conversation's key and its place in `turns`; the key its own answer is kept under (None
    when it has no answer); the key of each beginning of its turns (the last: the whole request, its prompt)."""

    turns: list[Turn]
    continued: list[tuple[bytes, int]]
    key: bytes | None
    prefixes: list[bytes]


def read_request(seed: str, route: str, request: Any, answer: Any) -> Reading:
    """`request` and its `answer` read for matching, in the conversation `seed` names (its scenario and session).
    One pass over the request, whatever its length."""
    turns = request_turns(route, request)
    own = answer_turn(answer)
    keys = conversation_keys(seed, [*turns, own] if own is not None else turns)
    continued = [(keys[at], at) for at in range(len(turns) - 2, -1, -1) if turns[at].role == "assistant"]
    return Reading(turns, continued, keys[-1] if own is not None else None, keys[: len(turns)])


def conversation_keys(seed: str, turns: Iterable[Turn]) -> list[bytes]:
    """The key of each beginning of `turns` (the i-th: its first i + 1 turns), chained from `seed` (the scenario
    and session the conversation belongs to), so that one pass over a conversation keys all its beginnings."""
    key = hashlib.blake2b(seed.encode(), digest_size=KEY_BYTES).digest()
    keys = []
    for turn in turns:
        key = hashlib.blake2b(key + turn.fingerprint, digest_size=KEY_BYTES).digest()
        keys.append(key)
    return keys


def next_turn(following: Iterable[Turn], max_chars: int) -> NextTurn:
    """What the turns after an answer say of it, read up to the next assistant turn: a tool's result, the agent's
    own markup, or the user's words (their first `max_chars` characters)."""
    said: list[str] = []
    left = max_chars
    for turn in following:
        if turn.role == "assistant":
            break
        if turn.role == "tool":
            return NextTurn("tool")
        if turn.role == "user" and left > 0:
            read = turn.text[:left]
            left -= len(read)
            said.append(without_agent_markup(read).strip())
    said = [text for text in said if text]
    if not said:
        return NextTurn("agent")
    return NextTurn("user", "\n".join(said))


def _words(text: str) -> Iterable[str]:
    """`text` with its spacing made one space each, in pieces of about WORDS_PIECE characters cut between words."""
    start = 0
    while start < len(text):
        space = _SPACE.search(text, start + WORDS_PIECE)
        end = space.start() if space is not None else len(text)
        if words := text[start:end].split():
            yield " ".join(words) + " "
        start = end


def _message_turn(message: dict[str, Any]) -> Turn:
    role = str(message.get("role") or "user")
    content = message.get("content")
    if role == "tool" or role == "function":
        return Turn("tool", _text_of(content))
    blocks = content if isinstance(content, list) else []
    results = [block for block in blocks if isinstance(block, dict) and block.get("type") == "tool_result"]
    if results:
        return Turn("tool", _text_of(content), failed=any(block.get("is_error") is True for block in results))
    text = _text_of(content)
    if role == "assistant":
        return Turn("assistant", text, tuple(_calls_of(message)))
    if role in ("system", "developer"):
        return Turn("system", text)
    return Turn("user", text)


def _calls_of(message: dict[str, Any]) -> list[ToolCall]:
    """An assistant message's tool calls: chat completions' `tool_calls`, or the messages API's `tool_use` blocks."""
    calls = []
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            function = call.get("function") or {}
            calls.append(_tool_call(function.get("name"), function.get("arguments")))
    content = message.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") in ("tool_use", "server_tool_use"):
            calls.append(_tool_call(block.get("name"), block.get("input")))
    return calls


def _tool_call(name: Any, arguments: Any) -> ToolCall:
    """A tool call as a fingerprint compares it: JSON arguments (a string of JSON or an object) written one way."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return ToolCall(str(name), arguments.strip())
    return ToolCall(str(name), json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False))


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
            elif block.get("type") == "tool_result":
                texts.append(_text_of(block.get("content")))
    return "\n".join(texts)


def _responses_turns(items: Any) -> list[Turn]:
    """The turns of a responses request's input. One answer is several items (a message, then its tool calls): an
    assistant's items in a row are one turn, as the answer they came from."""
    if isinstance(items, str):
        return [Turn("user", items)]
    if not isinstance(items, list):
        return []
    turns: list[Turn] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind in ("function_call_output", "custom_tool_call_output"):
            turns.append(Turn("tool", str(item.get("output") or "")))
        elif kind in ("function_call", "custom_tool_call"):
            call = _tool_call(item.get("name"), item.get("arguments", item.get("input")))
            turns.append(Turn("assistant", "", (call,)))
        elif kind == "message":
            turns.append(_message_turn(item))
        else:
            continue
        if len(turns) > 1 and turns[-2].role == turns[-1].role == "assistant":
            last, before = turns.pop(), turns.pop()
            text = "\n".join(text for text in (before.text, last.text) if text)
            turns.append(Turn("assistant", text, before.calls + last.calls))
    return turns
