"""Imported conversations written in one transaction per batch: a conversation already stored (same content, same
id) is a duplicate and adds nothing; a new one adds its record and, with a score, its report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from reef_daemon.records import ClientRecordDraft, InferenceDraft
from reef_daemon.store.records import RecordStore
from reef_daemon.store.writer import GroupCommitWriter, WriteContext


@dataclass(frozen=True)
class ImportDraft:
    """A conversation ready to store: the exchange, and the report of its score or feedback (if any)."""

    record: InferenceDraft
    report: ClientRecordDraft | None


Outcome = tuple[Literal["imported", "duplicate"], str | None]


class ImportStore:
    def __init__(self, writer: GroupCommitWriter, records: RecordStore) -> None:
        self._writer = writer
        self._records = records

    async def append(self, drafts: list[ImportDraft]) -> list[Outcome]:
        """Store each draft not stored yet; per draft, whether it was imported or a duplicate, and its report id."""
        return await self._writer.submit(lambda ctx: [self._insert(ctx, draft) for draft in drafts])

    def _insert(self, ctx: WriteContext, draft: ImportDraft) -> Outcome:
        found = ctx.conn.execute("SELECT 1 FROM records WHERE id = ?", (draft.record.id,)).fetchone()
        if found is not None:
            return "duplicate", None
        self._records.insert_inference(ctx, draft.record)
        if draft.report is None:
            return "imported", None
        row, _created = self._records.insert_client_record(ctx, draft.report)
        return "imported", row["id"]
