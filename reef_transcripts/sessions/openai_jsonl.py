"""OpenAI chat JSONL: one conversation per line, `{"messages": [...], "tools"?, "score"?, "feedback"?}` (the
fine-tuning format, and what `reef export --format openai` writes)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reef_contract import import_part_problem, score_problem
from reef_transcripts.chat import Message
from reef_transcripts.requests import request_messages
from reef_transcripts.sessions.items import Advance, BadLine, Conversation, json_lines, timestamp

FORMAT = "openai"


def read(path: Path, advance: Advance = None) -> Iterator[Conversation | BadLine]:
    for item in json_lines(path, advance):
        if isinstance(item, BadLine):
            yield item
            continue
        number, line = item
        problem = _problem(line)
        if problem is not None:
            yield BadLine(str(path), number, problem)
            continue
        messages: list[Message] = request_messages(None, {"messages": line["messages"]})
        score = line.get("score")
        yield Conversation(
            FORMAT, str(path), number, messages,
            model=line.get("model") if isinstance(line.get("model"), str) else None,
            tools=[tool for tool in line.get("tools") or [] if isinstance(tool, dict)],
            created_at=timestamp(line.get("created_at")),
            score=float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None,
            feedback=line.get("feedback"),
        )  # fmt: skip


def _problem(line: Any) -> str | None:
    if not isinstance(line, dict):
        return f"a line must be a JSON object with `messages`, not {type(line).__name__}"
    messages = line.get("messages")
    if not isinstance(messages, list) or not messages:
        return "`messages` must be a non-empty list"
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        return "every message must be an object with a `role`"
    for index, message in enumerate(messages):
        content = message.get("content")
        for number, part in enumerate(content if isinstance(content, list) else []):
            if (problem := import_part_problem(f"messages[{index}].content[{number}]", part)) is not None:
                return problem  # an image is refused, not imported as an empty turn
    score = line.get("score")
    if score is not None and (problem := score_problem(score)) is not None:
        return problem  # in the words the daemon and `reef score --from` use
    if line.get("created_at") is not None and timestamp(line["created_at"]) is None:
        return "`created_at` must be a time (ISO 8601 or epoch seconds)"
    if line.get("tools") is not None and not isinstance(line["tools"], list):
        return "`tools` must be a list"
    return None
