"""The `tool-error` report source: the answer whose tool call failed scores the bottom of the scale, with no model
call. The rule is conservative: a tool's result failed when its client marked it so (the messages API's
`is_error: true`), or when its text reports a non-zero exit (`Exit code: 1`, `exit status 2`, `exited with code 1`,
`"exit_code": 1`, `Process exited with code 1`) or holds a Python traceback (`Traceback (most recent call last):`).
Anything else (a zero exit, a warning, the word "error" in a file read) is no failure. Only the start and the end of
a result are read (HEAD_CHARS, TAIL_CHARS), where agents write the exit and Python its traceback.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from reef_contract import ReportSource
from reef_daemon.records import ClientRecordDraft
from reef_daemon.reports.derived import derived_report
from reef_daemon.reports.turns import Turn
from reef_daemon.settings import ReportsSection

SOURCE: ReportSource = "tool-error"
HEAD_CHARS = 4096
TAIL_CHARS = 16384
_FAILURE = re.compile(
    r"\bexit(?:ed with)?[ _](?:code|status)\b\"?:?\s*(?:-\s*)?[1-9]\d{0,3}\b"
    r"|^Traceback \(most recent call last\):$",
    re.IGNORECASE | re.MULTILINE,
)


def tool_failure(turn: Turn) -> str | None:
    """How a tool's result (a `tool` turn) shows it failed, by the rule above (`is_error`, or the words that show
    it: `Exit code: 1`); None when it did not fail."""
    if turn.role != "tool":
        return None
    if turn.failed:
        return "is_error"
    text = turn.text
    shown = text if len(text) <= HEAD_CHARS + TAIL_CHARS else f"{text[:HEAD_CHARS]}\n{text[-TAIL_CHARS:]}"
    found = _FAILURE.search(shown)
    return found.group(0) if found is not None else None


def tool_error_report(
    scenario: str, record_id: str, next_record_id: str, results: Iterable[Turn], settings: ReportsSection
) -> ClientRecordDraft | None:
    """The `tool-error` report on the earlier record `record_id`, whose answer's tool calls have `results` in the
    later record `next_record_id`; None when `reports.tool-error` is off or none of them failed."""
    if settings.tool_error != "on":
        return None
    failure = next((shown for turn in results if (shown := tool_failure(turn)) is not None), None)
    if failure is None:
        return None
    evidence = {"next_record": next_record_id, "rule": failure}
    return derived_report(scenario, record_id, SOURCE, settings.score_min, "a tool call of the answer failed", evidence)
