"""The `tests` report source: a test run in the transcript that turns red to green scores the answer that ran it at
the top of the scale, green to red at the bottom, with no model call; so do the answers since the run before.

A tool's result is a test run when it ends with a test runner's summary: pytest's (`3 failed, 10 passed in 0.52s`,
`FAILED tests/x.py::test_y`), npm test's under jest (`Tests: 1 failed, 5 passed, 6 total`) or mocha (`5 passing`,
`1 failing`), go test's (`ok  \tpkg\t0.01s`, `FAIL\tpkg`, `--- FAIL:`), cargo test's (`test result: ok.`,
`test result: FAILED.`). A run with any failure is red, one with passes and no failure green; only the last
TAIL_CHARS characters of a result are read, where runners write their summary. The run an answer's tool calls made
is compared with the latest run before that answer in the same conversation; when the colour changed, every answer
since that run (the edits that broke or fixed the tests, and the answer that ran them again) gets the report, up to
MAX_BETWEEN of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Literal

from reef_contract import ReportSource
from reef_daemon.records import ClientRecordDraft
from reef_daemon.reports.derived import derived_report
from reef_daemon.reports.turns import Turn
from reef_daemon.settings import ReportsSection

SOURCE: ReportSource = "tests"
TAIL_CHARS = 32768
MAX_BETWEEN = 32  # the most answers between two test runs one change of colour scores
Run = Literal["red", "green"]

_SUMMARY = re.compile(
    r"^=*[ \t]*(?P<pytest>(?:\d+ [a-z]+, )*\d+ [a-z]+) in \d+(?:\.\d+)?s\b"
    r"|^Tests:[ \t]+(?P<jest>(?:\d+ [a-z]+, )*\d+ total)$"
    r"|^[ \t]*\d+ (?P<mocha>passing|failing)\b"
    r"|^(?P<go_ok>ok)[ \t]+\S+[ \t]+(?:\d+(?:\.\d+)?s|\(cached\))"
    r"|^(?P<go_fail>FAIL[ \t]+\S+[ \t]+\d+(?:\.\d+)?s|--- FAIL: )"
    r"|^(?P<pytest_failed>FAILED) \S+::"
    r"|^test result: (?P<cargo>ok|FAILED)\.",
    re.MULTILINE,
)
_FAILING = re.compile(r"\b[1-9]\d* (?:failed|errors?)\b")
_PASSING = re.compile(r"\b[1-9]\d* passed\b")


def run_outcome(text: str) -> Run | None:
    """The outcome of the test run whose output `text` is: red, green, or None when it shows no runner's summary."""
    passed = False
    for found in _SUMMARY.finditer(text[-TAIL_CHARS:]):
        counts = found.group("pytest") or found.group("jest")
        if counts is not None:
            failed, green = _FAILING.search(counts) is not None, _PASSING.search(counts) is not None
        else:
            failed = found.group("mocha") == "failing" or found.group("cargo") == "FAILED"
            failed = failed or found.group("go_fail") is not None or found.group("pytest_failed") is not None
            green = not failed
        if failed:
            return "red"
        passed = passed or green
    return "green" if passed else None


def results_run(results: Iterable[Turn]) -> Run | None:
    """The outcome of the tool results an answer's calls got: red when any run failed, green when any ran and none
    failed, None when none was a test run."""
    runs = {run_outcome(turn.text) for turn in results if turn.role == "tool"}
    return "red" if "red" in runs else "green" if "green" in runs else None


def previous_run(turns: Sequence[Turn], before: int) -> tuple[Run, int] | None:
    """The outcome of the latest test run among `turns[:before]`, and that tool result's place; None when there
    was none."""
    for at in range(before - 1, -1, -1):
        if turns[at].role == "tool" and (run := run_outcome(turns[at].text)) is not None:
            return run, at
    return None


def answers_between(turns: Sequence[Turn], after: int, through: int) -> list[int]:
    """The places of the assistant turns after `after` up to `through` (the answers between two test runs, the
    one that made the later run last), at most MAX_BETWEEN of them, the latest kept."""
    places = [at for at in range(after + 1, through + 1) if turns[at].role == "assistant"]
    return places[-MAX_BETWEEN:]


def tests_report(
    scenario: str, record_id: str, next_record_id: str, before: Run | None, now: Run | None, settings: ReportsSection
) -> ClientRecordDraft | None:
    """The `tests` report on the earlier record `record_id`, whose tool calls' results in the later record
    `next_record_id` are the run `now`, `before` the conversation's previous run; None when `reports.tests` is off or
    the runs did not change colour."""
    if settings.tests != "on" or before is None or now is None or before == now:
        return None
    score, reason = (settings.score_max, "tests went green") if now == "green" else (settings.score_min, "tests broke")
    evidence = {"next_record": next_record_id, "before": before, "after": now}
    return derived_report(scenario, record_id, SOURCE, score, reason, evidence)
