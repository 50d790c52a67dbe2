"""Claude Code transcripts (`~/.claude/projects/<project>/<session>.jsonl`): one line per event, `type`
user | assistant (others: summary, system, file-history-snapshot), with `uuid`, `parentUuid`, `sessionId`,
`timestamp` and `message` {role, content, model?, usage?}. An assistant turn is often written as several lines,
one per content block; they are merged. Subagent lines (`isSidechain`) belong to another conversation: a
transcript keeps the kind of its first line (a subagent's own file holds only sidechain lines)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from reef_transcripts.anthropic import block_messages
from reef_transcripts.sessions.items import (
    Advance,
    BadLine,
    Conversation,
    Transcript,
    json_lines,
    session_conversation,
    timestamp,
)

FORMAT = "claude-code"


def read(path: Path, advance: Advance = None) -> Iterator[Conversation | BadLine]:
    transcript = Transcript()
    model: str | None = None
    session: str | None = None
    first: float | None = None
    last: float | None = None
    sidechain: bool | None = None
    for item in json_lines(path, advance):
        if isinstance(item, BadLine):
            yield item
            continue
        number, line = item
        if not isinstance(line, dict):
            yield BadLine(str(path), number, "a transcript line must be a JSON object")
            continue
        if line.get("type") not in ("user", "assistant"):
            continue
        if sidechain is None:  # a subagent's own file holds only its sidechain
            sidechain = bool(line.get("isSidechain"))
        if bool(line.get("isSidechain")) != sidechain:
            continue
        message = line.get("message")
        if not isinstance(message, dict) or "content" not in message:
            yield BadLine(str(path), number, "a user or assistant line needs a `message` with `content`")
            continue
        session = session or (str(line["sessionId"]) if line.get("sessionId") else None)
        at = timestamp(line.get("timestamp"))
        first = first if first is not None else at
        last = at if at is not None else last
        if isinstance(message.get("model"), str) and message["model"] != "<synthetic>":
            model = message["model"]
        for converted in block_messages(str(line["type"]), message["content"]):
            transcript.add(converted)
    yield session_conversation(
        FORMAT, path, transcript, model=model, first=first, last=last, session=session, noun="transcript"
    )
