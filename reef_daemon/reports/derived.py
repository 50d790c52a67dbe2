"""A report derived with no person (from the next turn, a judge's ranking), ready to store: one record, a score
already on the scale, the reason as its feedback and what it was derived from as its evidence."""

from __future__ import annotations

import time
from typing import Any

from reef_contract import ReportSource
from reef_daemon.records import ClientRecordDraft
from reef_daemon.reports import content_hash


def derived_report(
    scenario: str, record_id: str, source: ReportSource, score: float, reason: str, evidence: dict[str, Any]
) -> ClientRecordDraft:
    """The report of `source` on one record. Its id is the source's and the record's, so one source reports on a
    record once, whoever asks again (the store also keeps only the first per record and source)."""
    content = {"score": score, "feedback": reason, "references": [record_id], "evidence": evidence}
    digest = content_hash(scenario, {**content, "source": source})
    return ClientRecordDraft(f"{source}-{record_id}", scenario, "report", time.time(), content, digest, source)
