"""Reading what an agent did from the session logs it wrote (JSON lines under its home): the tool calls it made,
and its session as a readable transcript.

Agents spell a tool call differently (pi `toolCall`, codex `function_call`, or `custom_tool_call` for its
apply_patch, Claude Code `tool_use`); any JSON object of one of those types with a `name` counts. Arguments are
shortened for showing. The transcript reads pi's session entries (`message` lines: user, assistant and toolResult
messages) and codex's rollout (`response_item` lines: messages, function calls and their outputs), one
`[who] text` block each; the rest of a log (settings, token counts) is left out. A log in neither shape is kept as
its raw end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CALL_TYPES = frozenset({"toolCall", "tool_call", "function_call", "custom_tool_call", "tool_use", "local_shell_call"})
ARGS_LIMIT = 300
LOG_LIMIT = 256 * 1024  # bytes read from the end of each log
BLOCK_LIMIT = 2000  # characters of one message, call or result in the transcript


def tool_calls(folder: Path) -> list[str]:
    """Each tool call found in the folder's *.jsonl files, oldest log first, as `name args`."""
    calls: list[str] = []
    if not folder.is_dir():
        return calls
    logs = sorted(folder.rglob("*.jsonl"), key=lambda path: path.stat().st_mtime)
    for log in logs:
        for line in _tail(log).splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            calls += [_shown(call) for call in _calls(value)]
    return calls


def transcript(folder: Path, limit: int) -> str:
    """The end of the folder's session logs as a readable transcript, at most `limit` characters."""
    if not folder.is_dir():
        return ""
    logs = sorted(folder.rglob("*.jsonl"), key=lambda path: path.stat().st_mtime)
    raw = [_tail(log) for log in logs]
    blocks = [block for text in raw for line in text.splitlines() for block in _blocks(line)]
    text = "\n\n".join(blocks) if blocks else "".join(raw)
    return text[-limit:]


def _blocks(line: str) -> list[str]:
    """The readable blocks of one log line: pi's message entries, codex's response items; nothing else."""
    try:
        value = json.loads(line)
    except ValueError:
        return []
    if not isinstance(value, dict):
        return []
    if value.get("type") == "message" and isinstance(value.get("message"), dict):  # pi
        message = value["message"]
        role = str(message.get("role", "?"))
        return [_pi_part(role, part) for part in _list(message.get("content")) if isinstance(part, dict)]
    if value.get("type") == "response_item" and isinstance(value.get("payload"), dict):  # codex
        return _codex_item(value["payload"])
    return []


def _pi_part(role: str, part: dict[str, Any]) -> str:
    if part.get("type") == "toolCall":
        return _block("tool call", f"{part.get('name')} {_compact(part.get('arguments'))}")
    who = "tool result" if role == "toolResult" else role
    return _block(who, str(part.get("text", part.get("thinking", ""))))


def _codex_item(item: dict[str, Any]) -> list[str]:
    kind = item.get("type")
    if kind == "message":
        texts = [str(part.get("text", "")) for part in _list(item.get("content")) if isinstance(part, dict)]
        return [_block(str(item.get("role", "?")), "".join(texts))]
    if kind in CALL_TYPES:
        arguments = item.get("arguments", item.get("input", item.get("action", "")))
        return [_block("tool call", f"{item.get('name', kind)} {_compact(arguments)}")]
    if kind in ("function_call_output", "custom_tool_call_output"):
        output = item.get("output")
        return [_block("tool result", output if isinstance(output, str) else _compact(output))]
    return []


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _block(who: str, text: str) -> str:
    text = text.strip()
    if len(text) > BLOCK_LIMIT:
        text = text[:BLOCK_LIMIT] + "…"
    return f"[{who}] {text}"


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - LOG_LIMIT))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _calls(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        if value.get("type") in CALL_TYPES and isinstance(value.get("name"), str):
            yield value
            return
        for inner in value.values():
            yield from _calls(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _calls(inner)


def _shown(call: dict[str, Any]) -> str:
    arguments = call.get("arguments", call.get("input", call.get("action", "")))
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    text = " ".join(text.split())
    if len(text) > ARGS_LIMIT:
        text = text[:ARGS_LIMIT] + "…"
    return f"{call['name']} {text}".strip()
