"""Export lines, one JSON object per record (or per pair), in the formats training tools read:

- `openai`: `{"messages", "tools"?, "score"}`, the chat fine-tuning format, tool calls included;
- `preference`: `{"prompt", "chosen", "rejected", "score_chosen", "score_rejected"}`, the conversational
  preference format DPO trainers read: of the scored records with the same prompt, the best against the worst;
- `tokens`: `{"id", "prompt_ids", "output_ids", "logprobs", "versions", "reward"}`, what the embedded runtime
  recorded (records without token data are left out).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from reef_daemon.store.exports import ExportQuery, ExportReader, ExportRow
from reef_transcripts import Message, answer_message, request_messages, request_tools


def query_for(format: str, scenario: str, min_score: float | None, since: float | None) -> ExportQuery:
    """The records an export in `format` reads."""
    return ExportQuery(scenario, min_score, since, scored=format == "preference", with_tokens=format == "tokens")


async def export_lines(format: str, reader: ExportReader, query: ExportQuery) -> AsyncIterator[dict[str, Any]]:
    """The export's lines, read a page at a time."""
    if format == "preference":
        async for pair in _preference_lines(reader, query):
            yield pair
        return
    async for row in _rows(reader, query):
        line = _openai_line(row) if format == "openai" else _tokens_line(row)
        if line is not None:
            yield line


async def _rows(reader: ExportReader, query: ExportQuery) -> AsyncIterator[ExportRow]:
    after = 0
    while page := await reader.page(query, after):
        for row in page:
            yield row
        after = page[-1].sequence


def _conversation(row: ExportRow) -> tuple[list[Message], Message] | None:
    answer = answer_message(row.answer)
    return None if answer is None else (request_messages(row.route, row.request), answer)


def _openai_line(row: ExportRow) -> dict[str, Any] | None:
    conversation = _conversation(row)
    if conversation is None:
        return None
    prompt, answer = conversation
    line: dict[str, Any] = {"messages": [*prompt, answer]}
    tools = request_tools(row.route, row.request)
    if tools:
        line["tools"] = tools
    line["score"] = row.score
    return line


def _tokens_line(row: ExportRow) -> dict[str, Any] | None:
    tokens = row.tokens or {}
    if not tokens.get("output_ids"):
        return None
    return {
        "id": row.id,
        "prompt_ids": tokens.get("prompt_ids", []),
        "output_ids": tokens["output_ids"],
        "logprobs": tokens.get("logprobs", []),
        "versions": tokens.get("versions", []),
        "reward": row.score,
    }


@dataclass
class _Extremes:
    """The best and worst scored record of one prompt (score, sequence)."""

    best: tuple[float, int]
    worst: tuple[float, int]


async def _preference_lines(reader: ExportReader, query: ExportQuery) -> AsyncIterator[dict[str, Any]]:
    # One pass keeps, per distinct prompt, only its best and worst record (a digest and four numbers); a second
    # reads those records back, a page of pairs at a time.
    groups: dict[bytes, _Extremes] = {}
    async for row in _rows(reader, query):
        if row.score is None:
            continue
        key = _prompt_key(row)
        found = groups.get(key)
        mark = (row.score, row.sequence)
        if found is None:
            groups[key] = _Extremes(mark, mark)
        else:
            found.best = max(found.best, mark, key=lambda m: m[0])
            found.worst = min(found.worst, mark, key=lambda m: m[0])
    pairs = [(g.best[1], g.worst[1]) for g in groups.values() if g.best[0] > g.worst[0]]
    groups.clear()
    for start in range(0, len(pairs), 100):
        chunk = pairs[start : start + 100]
        rows = {row.sequence: row for row in await reader.by_sequence([s for pair in chunk for s in pair])}
        for chosen, rejected in chunk:
            line = _pair(rows[chosen], rows[rejected]) if chosen in rows and rejected in rows else None
            if line is not None:
                yield line


def _prompt_key(row: ExportRow) -> bytes:
    prompt = [request_messages(row.route, row.request), request_tools(row.route, row.request)]
    return hashlib.sha256(json.dumps(prompt, sort_keys=True, ensure_ascii=False).encode()).digest()


def _pair(chosen: ExportRow, rejected: ExportRow) -> dict[str, Any] | None:
    better, worse = _conversation(chosen), _conversation(rejected)
    if better is None or worse is None:
        return None
    return {
        "prompt": better[0],
        "chosen": [better[1]],
        "rejected": [worse[1]],
        "score_chosen": chosen.score,
        "score_rejected": rejected.score,
    }
