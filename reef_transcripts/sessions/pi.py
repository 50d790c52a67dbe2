"""pi sessions (`~/.pi/agent/sessions/<cwd>/<time>_<id>.jsonl`): a `session` header line {version, id, timestamp},
then entries with `id` and `parentId` forming a tree (a session branches when a turn is redone). `message` entries
hold {role: user | assistant | toolResult, content: [text | thinking | toolCall], model?}. The conversation is the
branch that ends at the last entry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reef_transcripts.chat import Message, assistant_message, text_of, tool_call
from reef_transcripts.sessions.items import (
    Advance,
    BadLine,
    Conversation,
    Transcript,
    indexed_json_lines,
    json_line_at,
    session_conversation,
    timestamp,
)

FORMAT = "pi"


def read(path: Path, advance: Advance = None) -> Iterator[Conversation | BadLine]:
    # A first pass keeps only where each entry starts and its parent; the branch's entries are read again one at a
    # time, so the file is never held whole.
    entries: dict[str, tuple[str | None, int]] = {}
    last_id: str | None = None
    session: str | None = None
    for item in indexed_json_lines(path, advance):
        if isinstance(item, BadLine):
            yield item
            continue
        number, offset, line = item
        if not isinstance(line, dict) or not isinstance(line.get("type"), str):
            yield BadLine(str(path), number, "a session line must be an object with a `type`")
            continue
        if line["type"] == "session":
            session = str(line.get("id") or "") or None
        elif isinstance(line.get("id"), str):
            parent = line.get("parentId")
            entries[line["id"]] = (parent if isinstance(parent, str) else None, offset)
            last_id = line["id"]
    transcript = Transcript()
    model: str | None = None
    first: float | None = None
    last: float | None = None
    with path.open("rb") as stream:
        for index, offset in enumerate(offsets := _branch(entries, last_id)):
            entry = json_line_at(stream, offset)
            if index == 0:
                first = timestamp(entry.get("timestamp"))
            if index == len(offsets) - 1:
                last = timestamp(entry.get("timestamp"))
            if entry["type"] == "model_change" and isinstance(entry.get("modelId"), str):
                model = entry["modelId"]
            message = entry.get("message")
            if entry["type"] == "message" and isinstance(message, dict):
                if isinstance(message.get("model"), str):
                    model = message["model"]
                converted = _message(message)
                if converted is not None:
                    transcript.add(converted)
    yield session_conversation(
        FORMAT, path, transcript, model=model, first=first, last=last, session=session, noun="session"
    )


def _branch(entries: dict[str, tuple[str | None, int]], last_id: str | None) -> list[int]:
    """The offsets of the entries from the root to `last_id`, following `parentId` (a cycle ends the walk)."""
    branch: list[int] = []
    seen: set[str] = set()
    current = last_id
    while current is not None and current in entries and current not in seen:
        seen.add(current)
        parent, offset = entries[current]
        branch.append(offset)
        current = parent
    branch.reverse()
    return branch


def _message(message: dict[str, Any]) -> Message | None:
    role = message.get("role")
    content = message.get("content")
    if role == "user":
        return {"role": "user", "content": text_of(content)}
    if role == "toolResult":
        return {"role": "tool", "tool_call_id": str(message.get("toolCallId", "")), "content": text_of(content)}
    if role != "assistant":
        return None
    parts = [part for part in content if isinstance(part, dict)] if isinstance(content, list) else []
    text = "".join(str(part.get("text", "")) for part in parts if part.get("type") == "text")
    calls = [tool_call(part.get("id"), part.get("name"), part.get("arguments", {}))
             for part in parts if part.get("type") == "toolCall"]  # fmt: skip
    return assistant_message(text, calls)
