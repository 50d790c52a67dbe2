"""Which reader a file needs: named with `--format`, or told from its first line; and the files under a path."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from reef_transcripts.sessions import claude_code, codex, openai_jsonl, pi
from reef_transcripts.sessions.items import MAX_LINE_BYTES, Advance, BadLine, Conversation

Reader = Callable[[Path, Advance], Iterator[Conversation | BadLine]]
FORMATS: dict[str, Reader] = {
    openai_jsonl.FORMAT: openai_jsonl.read,
    claude_code.FORMAT: claude_code.read,
    codex.FORMAT: codex.read,
    pi.FORMAT: pi.read,
}
CLAUDE_TYPES = ("user", "assistant", "summary", "system", "file-history-snapshot")


class UnknownFormat(Exception):
    """A file whose format cannot be told (or a format name reef does not know)."""


def session_files(path: Path) -> Iterator[Path]:
    """The file itself, or every `*.jsonl` file under a directory, in name order."""
    if path.is_dir():
        yield from sorted(p for p in path.rglob("*.jsonl") if p.is_file())
    else:
        yield path


def detect_format(path: Path) -> str:
    """The format of a session file, told from its first JSON line; UnknownFormat when none fits."""
    with path.open("rb") as stream:
        for raw in iter(lambda: stream.readline(MAX_LINE_BYTES), b""):
            if raw.strip():
                try:
                    return _format_of(json.loads(raw))
                except ValueError:
                    break
    raise UnknownFormat("cannot tell its format from its first line; name it with --format")


def _format_of(line: Any) -> str:
    if isinstance(line, dict):
        if "messages" in line:
            return openai_jsonl.FORMAT
        if line.get("type") == "session" and "version" in line:
            return pi.FORMAT
        if "payload" in line and "timestamp" in line:
            return codex.FORMAT
        if "sessionId" in line or line.get("type") in CLAUDE_TYPES:
            return claude_code.FORMAT
    raise UnknownFormat(f"not a known session format; name it with --format ({', '.join(FORMATS)})")


def read_conversations(
    path: Path, format: str | None = None, advance: Advance = None
) -> Iterator[Conversation | BadLine]:
    """The conversations of one file, in the named format or the detected one; an unreadable or unknown file, or
    one that is not a regular file, is one BadLine (line 0)."""
    if not path.is_file():  # a FIFO would block the import, a device (/dev/zero) never end it
        yield BadLine(str(path), 0, "not a regular file (a pipe, device or socket); name session files or folders")
        return
    try:
        name = format or detect_format(path)
        reader = FORMATS.get(name)
        if reader is None:
            raise UnknownFormat(f"unknown format '{name}'; use one of {', '.join(FORMATS)}")
        yield from reader(path, advance)
    except UnknownFormat as exc:
        yield BadLine(str(path), 0, str(exc))
    except OSError as exc:
        yield BadLine(str(path), 0, f"cannot read it ({exc.strerror or exc})")
