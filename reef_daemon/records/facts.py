"""What an exchange's span needs beyond its row, read from the draft and its summary as the record is stored and kept
beside its `record` event in this process only (never stored, never sent to a client): the exporter then builds the
span without reading the record back. An event from another process, or replayed, has none; its reader reads the
record instead (`from_stored`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reef_contract import StoredRecord
from reef_daemon.records.drafts import InferenceDraft
from reef_daemon.records.summary import InferenceSummary


@dataclass(frozen=True, slots=True)
class ExchangeFacts:
    requested_model: str | None
    stream: bool
    ttft_ms: float | None
    error: str | None
    finish_reason: str | None
    tags: Mapping[str, str]

    def as_list(self) -> list[Any]:
        """The fields in order, as JSON can carry them (`ExchangeFacts(*facts)` reads them back)."""
        return [self.requested_model, self.stream, self.ttft_ms, self.error, self.finish_reason, dict(self.tags)]

    @classmethod
    def from_draft(cls, draft: InferenceDraft, summary: InferenceSummary) -> ExchangeFacts:
        answer = summary.answer
        return cls(
            draft.model, draft.stream, draft.ttft_ms, draft.error,
            answer["finish_reason"] if answer is not None else None, draft.tags,
        )  # fmt: skip

    @classmethod
    def from_stored(cls, record: StoredRecord) -> ExchangeFacts:
        request = record["request"] if isinstance(record["request"], dict) else {}
        model = request.get("model")
        answer = record["answer"]
        return cls(
            model if isinstance(model, str) else None, request.get("stream") is True, record["timings"]["ttft_ms"],
            record["error"], answer["finish_reason"] if answer is not None else None, record["tags"],
        )  # fmt: skip
