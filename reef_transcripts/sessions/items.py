"""What a session reader yields: a conversation with where it came from, or a line it could not use and why."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from reef_transcripts.chat import Message, append_message, trim_to_last_answer

# A longer line is reported and skipped without being held in memory.
MAX_LINE_BYTES = 16 * 1024 * 1024
# One conversation larger than this would not fit the daemon's default body limit (64 MiB) with room to spare; a
# session reader stops keeping a conversation's messages once they pass it, so its memory stays bounded.
MAX_CONVERSATION_BYTES = 48 * 1024 * 1024
_CHUNK = 1024 * 1024
# Told how many bytes of the file were read, for a progress bar.
Advance = Callable[[int], None] | None


@dataclass(frozen=True)
class BadLine:
    """A line that was skipped: its file, its 1-based number (0: the file as a whole) and the reason."""

    file: str
    line: int
    reason: str

    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass
class Conversation:
    """One conversation to import: chat messages ending with the assistant's answer, and what is known of it."""

    format: str
    file: str
    line: int
    messages: list[Message]
    model: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    created_at: float | None = None
    duration_ms: float | None = None
    session: str | None = None
    score: float | None = None
    feedback: Any = None

    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def to_wire(self) -> dict[str, Any]:
        """The conversation as `POST /reef/records/batch` takes it (the contract's ImportConversation)."""
        wire: dict[str, Any] = {"messages": self.messages, "format": self.format}
        for key in ("model", "created_at", "duration_ms", "session", "score", "feedback"):
            value = getattr(self, key)
            if value is not None:
                wire[key] = value
        if self.tools:
            wire["tools"] = self.tools
        return wire


def json_lines(path: Path, advance: Advance = None) -> Iterator[tuple[int, Any] | BadLine]:
    """Each non-blank line of a file parsed as JSON, with its number; a line that is not JSON, not UTF-8, nested
    too deeply or longer than MAX_LINE_BYTES comes back as a BadLine (the long one is skipped in chunks, never
    held whole)."""
    for item in indexed_json_lines(path, advance):
        yield item if isinstance(item, BadLine) else (item[0], item[2])


def indexed_json_lines(path: Path, advance: Advance = None) -> Iterator[tuple[int, int, Any] | BadLine]:
    """As `json_lines`, with the byte offset each line starts at (for `json_line_at`)."""
    with path.open("rb") as stream:
        number = 0
        while True:
            offset = stream.tell()
            raw = stream.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            number += 1
            if advance is not None:
                advance(len(raw))
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                while rest := stream.readline(_CHUNK):
                    if advance is not None:
                        advance(len(rest))
                    if rest.endswith(b"\n"):
                        break
                yield BadLine(str(path), number, f"the line is longer than {MAX_LINE_BYTES // 2**20} MiB")
                continue
            if not raw.strip():
                continue
            parsed = _parsed(raw)
            yield BadLine(str(path), number, parsed) if isinstance(parsed, str) else (number, offset, parsed[0])


def json_line_at(stream: Any, offset: int) -> Any:
    """The JSON line at `offset` of an open binary file, read again (it parsed once already)."""
    stream.seek(offset)
    return json.loads(stream.readline(MAX_LINE_BYTES + 1))


def _parsed(raw: bytes) -> tuple[Any] | str:
    """The line's value (in a 1-tuple), or why it cannot be read."""
    try:
        return (json.loads(raw),)
    except UnicodeDecodeError:
        return "the line is not UTF-8 text"
    except RecursionError:
        return "the line is nested too deeply to read"
    except ValueError as exc:
        return f"not JSON ({exc})"


class Transcript:
    """A session's messages as they are read, merged like `append_message`; once they pass MAX_CONVERSATION_BYTES
    they are dropped and the conversation marked too large, so a reader holds at most that much of any file."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.size = 0
        self.too_large = False

    def add(self, message: Message, *, first: bool = False) -> None:
        if self.too_large:
            return
        self.size += len(json.dumps(message, ensure_ascii=False))
        if self.size > MAX_CONVERSATION_BYTES:
            self.too_large = True
            self.messages = []
        elif first:
            self.messages.insert(0, message)
        else:
            append_message(self.messages, message)


def session_conversation(
    format: str,
    path: Path,
    transcript: Transcript,
    *,
    model: str | None,
    first: float | None,
    last: float | None,
    session: str | None,
    noun: str,
) -> Conversation | BadLine:
    """A session file's one conversation, trimmed to its last answer, from its `first` to its `last` timestamp; a
    BadLine for the whole file when the `noun` (transcript, rollout, session) has no assistant answer or is too
    large to import."""
    if transcript.too_large:
        return BadLine(str(path), 0, f"the conversation is larger than {MAX_CONVERSATION_BYTES >> 20} MiB")
    messages = trim_to_last_answer(transcript.messages)
    if not messages:
        return BadLine(str(path), 0, f"the {noun} has no assistant answer")
    return Conversation(format, str(path), 1, messages, model=model, created_at=first,
                        duration_ms=span_ms(first, last), session=session)  # fmt: skip


def timestamp(value: Any) -> float | None:
    """Seconds since the epoch from an ISO 8601 string (a trailing Z included) or from epoch seconds/ms."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            seconds = float(value) / 1000 if value > 1e11 else float(value)
        except OverflowError:
            return None
        return seconds if math.isfinite(seconds) else None
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def span_ms(first: float | None, last: float | None) -> float | None:
    """Milliseconds from the first to the last timestamp of a session, when both are known."""
    return round((last - first) * 1000, 3) if first is not None and last is not None and last >= first else None
