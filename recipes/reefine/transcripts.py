"""Reading what an agent did from the session logs it wrote (JSON lines under its home): the tool calls it made.

Agents spell a tool call differently (pi `toolCall`, codex `function_call`, Claude Code `tool_use`); any JSON
object of one of those types with a `name` counts. Arguments are shortened for showing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CALL_TYPES = frozenset({"toolCall", "tool_call", "function_call", "tool_use", "local_shell_call"})
ARGS_LIMIT = 300
LOG_LIMIT = 256 * 1024  # bytes read from the end of each log


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
    """The end of the folder's session logs, at most `limit` characters."""
    if not folder.is_dir():
        return ""
    logs = sorted(folder.rglob("*.jsonl"), key=lambda path: path.stat().st_mtime)
    text = "".join(_tail(log) for log in logs)
    return text[-limit:]


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
