"""codex session rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`): lines `{timestamp, type, payload}`;
`session_meta` (id, base instructions), `turn_context` (model), and `response_item` payloads in the responses
API's item shape (messages, function calls and outputs, reasoning). Events (`event_msg`) repeat the items."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reef_transcripts.chat import text_of
from reef_transcripts.responses import item_message
from reef_transcripts.sessions.items import (
    Advance,
    BadLine,
    Conversation,
    Transcript,
    json_lines,
    session_conversation,
    timestamp,
)

FORMAT = "codex"


def read(path: Path, advance: Advance = None) -> Iterator[Conversation | BadLine]:
    transcript = Transcript()
    model: str | None = None
    session: str | None = None
    first: float | None = None
    last: float | None = None
    for item in json_lines(path, advance):
        if isinstance(item, BadLine):
            yield item
            continue
        number, line = item
        if not isinstance(line, dict) or not isinstance(line.get("payload"), dict):
            yield BadLine(str(path), number, "a rollout line must be an object with a `payload` object")
            continue
        payload = line["payload"]
        at = timestamp(line.get("timestamp"))
        first = first if first is not None else at
        kind = line.get("type")
        if kind == "session_meta":
            session = str(payload.get("id") or "") or None
            instructions = _instructions(payload.get("base_instructions"))
            if instructions:
                transcript.add({"role": "system", "content": instructions}, first=True)
        elif kind == "turn_context" and isinstance(payload.get("model"), str):
            model = payload["model"]
        elif kind == "response_item":
            message = item_message(payload)
            if message is not None:
                transcript.add(message)
                last = at if at is not None else last
    yield session_conversation(
        FORMAT, path, transcript, model=model, first=first, last=last, session=session, noun="rollout"
    )


def _instructions(value: Any) -> str:
    """Base instructions as codex writes them: `{"text": ...}`, or (older rollouts) the text itself."""
    return text_of(value.get("text", "") if isinstance(value, dict) else value)
