"""The `words` report source: an answer scored by what the user wrote next, read by rules (reports/words.py) with no
model call. A low reading is the bottom of the deployment's scale, a high one its top; a message the rules cannot
tell makes no report and is left to the next-turn judge, when there is one.

The next-turn path calls `words_report` once it has matched a user's next message to the earlier answer, before it
asks any judge model, and asks the judge only when this returns None.
"""

from __future__ import annotations

from reef_contract import ReportSource
from reef_daemon.records import ClientRecordDraft
from reef_daemon.reports.derived import derived_report
from reef_daemon.reports.evidence import without_code
from reef_daemon.reports.words import MAX_CHARS, read_words
from reef_daemon.settings import ReportsSection

SOURCE: ReportSource = "words"


def words_report(
    scenario: str, record_id: str, next_record_id: str, next_message: str, settings: ReportsSection
) -> ClientRecordDraft | None:
    """The `words` report on the earlier record `record_id` of `scenario`, from `next_message`, the user's message
    in the later record `next_record_id`; None when `reports.words` is off or the rules cannot tell."""
    if settings.words != "on":
        return None
    reading = read_words(next_message)
    if reading is None:
        return None
    score = settings.score_min if reading.score == "low" else settings.score_max
    reason = f'the user\'s next message says "{reading.phrase}"'
    evidence = {
        "rule": reading.phrase,
        "next_record": next_record_id,
        "next_message": without_code(next_message[:MAX_CHARS]),
    }
    return derived_report(scenario, record_id, SOURCE, score, reason, evidence)
