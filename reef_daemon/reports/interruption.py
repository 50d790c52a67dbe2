"""The `interruption` report source: an exchange its client cut off before the answer's end (the record is not
`complete`, its `error` says the client disconnected), followed by a new request in the same conversation (of the
same session, `x-reef-tag-session`, its turns beginning with the cut request's turns), scores the cut answer at the
bottom of the scale, with no model call. An exchange cut by the upstream or by reef's own shutdown is no
interruption: the user did not stop it."""

from __future__ import annotations

from typing import Any

from reef_contract import ReportSource
from reef_daemon.records import ClientRecordDraft
from reef_daemon.reports.derived import derived_report
from reef_daemon.settings import ReportsSection

SOURCE: ReportSource = "interruption"
CLIENT_LEFT = "client disconnected"  # the error the proxy records when its client hangs up


def interrupted(record: Any) -> bool:
    """Whether a stored record (`StoredRecord`) is an exchange its client cut off before the end."""
    return record.get("complete") is False and record.get("error") == CLIENT_LEFT


def interruption_report(
    scenario: str, record_id: str, next_record_id: str, settings: ReportsSection
) -> ClientRecordDraft | None:
    """The `interruption` report on the cut record `record_id`, which the later record `next_record_id` followed in
    its conversation; None when `reports.interruption` is off."""
    if settings.interruption != "on":
        return None
    reason = "the user cut the answer off and went on"
    return derived_report(scenario, record_id, SOURCE, settings.score_min, reason, {"next_record": next_record_id})
