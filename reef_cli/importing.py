"""`reef import`: session files read as conversations, sent in batches, every refusal reported with its file and
line. Files are streamed and batches bounded, so an import of any size runs in constant memory."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reef_client import ApiError, ReefClient
from reef_contract import MAX_BATCH, ImportConversation, ImportResult
from reef_transcripts.sessions import (
    MAX_CONVERSATION_BYTES,
    BadLine,
    Conversation,
    read_conversations,
    session_files,
)

# A batch is sent when it holds this many conversations or this many bytes of JSON, whichever comes first.
BATCH_CONVERSATIONS = min(200, MAX_BATCH)
BATCH_BYTES = 8 * 1024 * 1024


@dataclass
class ImportSummary:
    """What an import did: conversations imported, skipped as already stored, and refused (with where and why)."""

    imported: int = 0
    duplicate: int = 0
    refused: list[BadLine] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"imported": self.imported, "duplicate": self.duplicate, "refused": len(self.refused)}

    def sentence(self) -> str:
        return f"imported {self.imported}, skipped {self.duplicate} as duplicate, refused {len(self.refused)}"


@dataclass
class _Batch:
    conversations: list[ImportConversation] = field(default_factory=list)
    sources: list[Conversation] = field(default_factory=list)
    size: int = 0
    # Refusals of lines read while this batch was open, by their place among the lines read: they are said when the
    # batch has been answered, so that every refusal comes in the order of the lines.
    held: list[tuple[int, BadLine]] = field(default_factory=list)
    places: list[int] = field(default_factory=list)


def import_files(
    client: ReefClient,
    scenario: str,
    paths: list[Path],
    format: str | None,
    *,
    on_refused: Callable[[BadLine], None],
    on_stored: Callable[[Conversation, ImportResult], None],
    advance: Callable[[int], None],
) -> ImportSummary:
    """Import every conversation under `paths` into `scenario`; `on_refused` hears each refusal, `on_stored` each
    conversation stored (or found stored) with its receipt, both in the order of the lines, as soon as the batch a
    line belongs beside is answered; `advance` hears how many bytes were read."""
    summary = ImportSummary()
    batch = _Batch()

    def refuse(bad: BadLine) -> None:
        summary.refused.append(bad)
        on_refused(bad)

    def refuse_in_order(place: int, bad: BadLine) -> None:
        if batch.conversations:
            batch.held.append((place, bad))
        else:
            refuse(bad)

    for place, item in enumerate(_items(paths, format, advance)):
        if isinstance(item, BadLine):
            refuse_in_order(place, item)
            continue
        wire: Any = item.to_wire()
        encoded = _encoded(wire)
        if isinstance(encoded, str):
            refuse_in_order(place, BadLine(item.file, item.line, encoded))
            continue
        size = len(encoded)
        if size > MAX_CONVERSATION_BYTES:
            too_large = f"the conversation is larger than {MAX_CONVERSATION_BYTES >> 20} MiB"
            refuse_in_order(place, BadLine(item.file, item.line, too_large))
            continue
        if batch.conversations and (batch.size + size > BATCH_BYTES or len(batch.conversations) >= BATCH_CONVERSATIONS):
            _send(client, scenario, batch, summary, refuse, on_stored)
            batch = _Batch()
        batch.conversations.append(wire)
        batch.sources.append(item)
        batch.places.append(place)
        batch.size += size
    if batch.conversations:
        _send(client, scenario, batch, summary, refuse, on_stored)
    return summary


def _encoded(wire: Any) -> bytes | str:
    """The conversation as the JSON it is sent as, or why it cannot be sent (the daemon would refuse the whole
    batch it came in)."""
    try:
        return json.dumps(wire, ensure_ascii=False, allow_nan=False).encode()
    except UnicodeEncodeError:
        return "the line holds a lone surrogate (\\ud800-\\udfff), which is not text"
    except ValueError:
        return "the line holds NaN or Infinity, which JSON has no place for"
    except RecursionError:
        return "the line is nested too deeply to read"


def import_size(paths: list[Path]) -> int:
    """How many bytes the import reads (for its progress bar)."""
    return sum(_size(file) for path in paths for file in session_files(path))


def _size(file: Path) -> int:
    try:
        return file.stat().st_size
    except OSError:
        return 0


def _items(paths: list[Path], format: str | None, advance: Callable[[int], None]) -> Iterator[Conversation | BadLine]:
    for path in paths:
        if not path.exists():
            yield BadLine(str(path), 0, "no such file or directory")
            continue
        for file in session_files(path):
            yield from read_conversations(file, format, advance)


def _send(
    client: ReefClient,
    scenario: str,
    batch: _Batch,
    summary: ImportSummary,
    refuse: Callable[[BadLine], None],
    on_stored: Callable[[Conversation, ImportResult], None],
) -> None:
    said: list[tuple[int, Callable[[], None]]] = [(place, functools.partial(refuse, bad)) for place, bad in batch.held]
    try:
        ack = client.import_batch(scenario, batch.conversations)
    except ApiError as exc:  # the whole batch was refused (a scenario name, a body limit): say so for each line
        for place, source in zip(batch.places, batch.sources, strict=True):
            why = BadLine(source.file, source.line, f"{exc.message} ({exc.type})")
            said.append((place, functools.partial(refuse, why)))
    else:
        summary.imported += ack["imported"]
        summary.duplicate += ack["duplicate"]
        for result in ack["results"]:
            place, source = batch.places[result["index"]], batch.sources[result["index"]]
            if result["status"] == "refused":
                said.append(
                    (place, functools.partial(refuse, BadLine(source.file, source.line, str(result["reason"]))))
                )
            else:
                said.append((place, functools.partial(on_stored, source, result)))
    for _place, say in sorted(said, key=lambda entry: entry[0]):
        say()
