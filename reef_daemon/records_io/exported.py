"""Export lines, one JSON object per record (or per pair), in the formats training tools read:

- `openai`: `{"messages", "tools"?, "score"}`, the chat fine-tuning format, tool calls included;
- `preference`: `{"prompt", "chosen", "rejected", "score_chosen", "score_rejected"}`, the conversational
  preference format DPO trainers read: of the scored records with the same prompt, the best against the worst;
- `tokens`: `{"id", "prompt_ids", "output_ids", "logprobs", "versions", "reward"}`, what the embedded runtime
  recorded (records without token data are left out), and `adapters` (the scenario whose LoRA adapter served each
  token, null for the base) where a weight recipe trains adapters; `versions` are then the adapters' versions.

Only answers that arrived whole are exported unless cut ones are asked for; a cut one is marked
`"complete": false` (in a pair, when either side was cut). A record whose stored request cannot be rendered is
skipped, logged with its id, and counted in `Skipped`, so one odd record never ends an export early.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from reef_daemon.store.exports import ExportQuery, ExportReader, ExportRow, StoredRow
from reef_transcripts import Message, answer_message, request_messages, request_tools

log = logging.getLogger("reef.export")


def query_for(
    format: str, scenario: str, min_score: float | None, since: float | None, *, include_cut: bool = False
) -> ExportQuery:
    """The records an export in `format` reads."""
    return ExportQuery(
        scenario, min_score, since, scored=format == "preference", with_tokens=format == "tokens",
        include_cut=include_cut,
    )  # fmt: skip


@dataclass
class Skipped:
    """The records an export left out because they could not be rendered."""

    ids: list[str] = field(default_factory=list)

    def note(self, row: StoredRow | ExportRow, error: Exception) -> None:
        log.warning("export: record %s cannot be rendered and is left out (%s: %s)", row.id,
                    type(error).__name__, error)  # fmt: skip
        self.ids.append(row.id)


async def export_lines(
    format: str, reader: ExportReader, query: ExportQuery, *, page_bytes: int, skipped: Skipped
) -> AsyncIterator[dict[str, Any]]:
    """The export's lines, read `page_bytes` of stored records at a time."""
    if format == "preference":
        async for pair in _preference_lines(reader, query, page_bytes, skipped):
            yield pair
        return
    render = _openai_line if format == "openai" else _tokens_line
    async for stored in _rows(reader, query, page_bytes):
        line = _rendered(stored, render, skipped)
        if line is not None:
            yield line


def _rendered(
    stored: StoredRow, render: Callable[[ExportRow], dict[str, Any] | None], skipped: Skipped
) -> dict[str, Any] | None:
    try:
        return render(stored.decoded())
    except Exception as exc:  # a stored body of any shape; one must not end the export
        skipped.note(stored, exc)
        return None


async def _rows(reader: ExportReader, query: ExportQuery, page_bytes: int) -> AsyncIterator[StoredRow]:
    after = 0
    while page := await reader.page(query, after, page_bytes):
        after = page[-1].sequence
        page.reverse()
        while page:  # each row leaves the page as it is yielded, so only one is ever decoded
            yield page.pop()


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
    if not row.complete:
        line["complete"] = False
    return line


def _tokens_line(row: ExportRow) -> dict[str, Any] | None:
    tokens = row.tokens or {}
    if not tokens.get("output_ids"):
        return None
    line = {
        "id": row.id,
        "prompt_ids": tokens.get("prompt_ids", []),
        "output_ids": tokens["output_ids"],
        "logprobs": tokens.get("logprobs", []),
        "versions": tokens.get("versions", []),
        "reward": row.score,
    }
    if any(tokens.get("adapters") or ()):
        line["adapters"] = tokens["adapters"]
    if not row.complete:
        line["complete"] = False
    return line


@dataclass
class _Extremes:
    """The best and worst scored record of one prompt: (score, sequence, stored bytes)."""

    best: tuple[float, int, int]
    worst: tuple[float, int, int]


async def _preference_lines(
    reader: ExportReader, query: ExportQuery, page_bytes: int, skipped: Skipped
) -> AsyncIterator[dict[str, Any]]:
    # One pass keeps, per distinct prompt, only its best and worst record (a digest and six numbers); a second
    # reads those records back, `page_bytes` of pairs at a time.
    groups: dict[bytes, _Extremes] = {}
    async for stored in _rows(reader, query, page_bytes):
        if stored.score is None:
            continue
        try:
            key = _prompt_key(stored.decoded())
        except Exception as exc:  # as in export_lines: one odd record is left out, not fatal
            skipped.note(stored, exc)
            continue
        found = groups.get(key)
        mark = (stored.score, stored.sequence, stored.size)
        if found is None:
            groups[key] = _Extremes(mark, mark)
        else:
            found.best = max(found.best, mark, key=lambda m: m[0])
            found.worst = min(found.worst, mark, key=lambda m: m[0])
    pairs = [(g.best, g.worst) for g in groups.values() if g.best[0] > g.worst[0]]
    groups.clear()
    for chunk in _chunks(pairs, page_bytes):
        found_rows = {row.sequence: row for row in await reader.by_sequence([m[1] for pair in chunk for m in pair])}
        for chosen, rejected in chunk:
            better, worse = found_rows.pop(chosen[1], None), found_rows.pop(rejected[1], None)
            if better is None or worse is None:
                continue
            try:
                line = _pair(better.decoded(), worse.decoded())
            except Exception as exc:  # as above
                skipped.note(better, exc)
                continue
            if line is not None:
                yield line


def _chunks(
    pairs: list[tuple[tuple[float, int, int], tuple[float, int, int]]], page_bytes: int
) -> list[list[tuple[tuple[float, int, int], tuple[float, int, int]]]]:
    """The pairs in runs of at most 100 whose records add up to `page_bytes` (a larger pair runs alone)."""
    chunks: list[list[tuple[tuple[float, int, int], tuple[float, int, int]]]] = []
    size = 0
    for pair in pairs:
        pair_size = pair[0][2] + pair[1][2]
        if not chunks or len(chunks[-1]) >= 100 or size + pair_size > page_bytes:
            chunks.append([])
            size = 0
        chunks[-1].append(pair)
        size += pair_size
    return chunks


def _prompt_key(row: ExportRow) -> bytes:
    prompt = [request_messages(row.route, row.request), request_tools(row.route, row.request)]
    return hashlib.sha256(json.dumps(prompt, sort_keys=True, ensure_ascii=False).encode()).digest()


def _pair(chosen: ExportRow, rejected: ExportRow) -> dict[str, Any] | None:
    better, worse = _conversation(chosen), _conversation(rejected)
    if better is None or worse is None:
        return None
    line: dict[str, Any] = {
        "prompt": better[0],
        "chosen": [better[1]],
        "rejected": [worse[1]],
        "score_chosen": chosen.score,
        "score_rejected": rejected.score,
    }
    if not (chosen.complete and rejected.complete):
        line["complete"] = False
    return line
