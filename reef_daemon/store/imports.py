"""Imported conversations written in one transaction per batch: a conversation already stored in its scenario (same
content, same id) is a duplicate and adds nothing; a new one adds its record and, with a score, its report. An id
held by a record of another scenario (the same conversation, kept under an archived scenario's name) is passed
over for the conversation's next one, so a scenario imported again after its archive is whole again."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from reef_daemon.records import ClientRecordDraft, InferenceDraft
from reef_daemon.store.engines.writer import GroupCommitWriter, WriteContext
from reef_daemon.store.records import RecordStore


@dataclass(frozen=True)
class ImportDraft:
    """A conversation ready to store: the exchange, and the report of its score or feedback (if any)."""

    record: InferenceDraft
    report: ClientRecordDraft | None


# A conversation's draft under its n-th id (0 first).
DraftFor = Callable[[int], ImportDraft]
# Whether it was imported or a duplicate, its record id, and its report's id (if any).
Outcome = tuple[Literal["imported", "duplicate"], str, str | None]


class ImportStore:
    def __init__(self, writer: GroupCommitWriter, records: RecordStore) -> None:
        self._writer = writer
        self._records = records

    async def append(self, drafts: list[DraftFor]) -> list[Outcome]:
        """Store each draft not stored yet; per draft, whether it was imported or a duplicate, and its ids."""
        return await self._writer.submit(lambda ctx: [self._insert(ctx, draft_for) for draft_for in drafts])

    def _insert(self, ctx: WriteContext, draft_for: DraftFor) -> Outcome:
        for attempt in itertools.count():
            draft = draft_for(attempt)
            found = ctx.conn.execute("SELECT scenario FROM records WHERE id = ?", (draft.record.id,)).fetchone()
            if found is None:
                break
            if found["scenario"] == draft.record.scenario:
                return "duplicate", draft.record.id, None
        self._records.insert_inference(ctx, draft.record)
        if draft.report is None:
            return "imported", draft.record.id, None
        row, _created = self._records.insert_client_record(ctx, draft.report)
        return "imported", draft.record.id, row["id"]
