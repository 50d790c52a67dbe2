"""The `retry` report source: the same request sent again in a session (a regenerate) scores the earlier answer at
the bottom of the scale, with no model call. The later request is a retry when its turns equal the earlier
record's request turns, compared by fingerprint (`turns.conversation_keys`): it carries none of the earlier answer,
so the user asked for another in its place. Only requests tagged with the same session (`x-reef-tag-session`) are
compared: without one, the same prompt twice may be two users, or a script, not a retry."""

from __future__ import annotations

from reef_contract import ReportSource
from reef_daemon.records import ClientRecordDraft
from reef_daemon.reports.derived import derived_report
from reef_daemon.settings import ReportsSection

SOURCE: ReportSource = "retry"


def retry_report(
    scenario: str, record_id: str, next_record_id: str, settings: ReportsSection
) -> ClientRecordDraft | None:
    """The `retry` report on the earlier record `record_id`, whose request the later record `next_record_id` sent
    again; None when `reports.retry` is off."""
    if settings.retry != "on":
        return None
    reason = "the same request was sent again for another answer"
    return derived_report(scenario, record_id, SOURCE, settings.score_min, reason, {"next_record": next_record_id})
