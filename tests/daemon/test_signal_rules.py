"""The rules of the signals that need no model, each read alone: which tool results failed, which test runs are red
or green and how a run compares with the one before it, which records a client cut off, and the reports they make
(each at the end of the scale, each behind its setting)."""

from __future__ import annotations

import dataclasses

import pytest

from reef_daemon.reports import red_green
from reef_daemon.reports.interruption import interrupted, interruption_report
from reef_daemon.reports.retry import retry_report
from reef_daemon.reports.tool_errors import tool_error_report, tool_failure
from reef_daemon.reports.turns import Turn, read_request, request_turns
from reef_daemon.settings import ReportsSection

ON = ReportsSection()
SCALE = dataclasses.replace(ON, score_min=-1.0, score_max=2.0)


@pytest.mark.parametrize(
    ("output", "failed"),
    [
        ("Exit code: 1\nWall time: 0.2 seconds\nOutput:\nno such file", "Exit code: 1"),
        ('{"output": "boom", "metadata": {"exit_code": 2}}', 'exit_code": 2'),
        ("make: *** [all] Error 2\nProcess exited with code 2", "exited with code 2"),
        ("exit status 127", "exit status 127"),
        ("Traceback (most recent call last):\n  NameError: x", "Traceback (most recent call last):"),
        ("Exit code: 0\nOutput:\nall good", None),
        ("error: the word error in a file is no failure", None),
        ("the exit code is documented in README", None),
    ],
)
def test_a_tool_result_fails_on_a_non_zero_exit_or_a_traceback(output: str, failed: str | None) -> None:
    assert tool_failure(Turn("tool", output)) == failed


def test_the_messages_apis_is_error_marks_a_failed_tool_result() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "run it"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": True, "content": "x"}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "fine"}]},
        ]
    }
    failed, fine = request_turns("/v1/messages", body)[2:]
    assert tool_failure(failed) == "is_error" and tool_failure(fine) is None
    # The mark does not change the turn's fingerprint: a conversation keys the same whatever its client marks.
    assert failed.fingerprint == dataclasses.replace(failed, failed=False).fingerprint
    # A traceback in what a user wrote is no tool's failure.
    assert tool_failure(Turn("user", "Traceback (most recent call last):")) is None


def test_a_tool_error_report_is_low_names_its_rule_and_obeys_its_setting() -> None:
    results = [Turn("tool", "ok"), Turn("tool", "Exit code: 3")]
    draft = tool_error_report("demo", "a" * 32, "b" * 32, results, SCALE)
    assert draft is not None and draft.source == "tool-error" and draft.id == f"tool-error-{'a' * 32}"
    assert draft.content["score"] == -1.0 and draft.content["references"] == ["a" * 32]
    assert draft.content["evidence"] == {"next_record": "b" * 32, "rule": "Exit code: 3"}
    assert tool_error_report("demo", "a" * 32, "b" * 32, results[:1], SCALE) is None
    off = dataclasses.replace(SCALE, tool_error="off")
    assert tool_error_report("demo", "a" * 32, "b" * 32, results, off) is None


@pytest.mark.parametrize(
    ("output", "run"),
    [
        ("..F\n=========== 1 failed, 2 passed in 0.31s ===========", "red"),
        ("...\n=========== 3 passed, 1 warning in 0.12s ===========", "green"),
        ("3 passed in 0.12s", "green"),
        ("E\n=== 1 error in 0.05s ===", "red"),
        ("FAILED tests/test_a.py::test_b - assert 1 == 2", "red"),
        ("Tests:       1 failed, 5 passed, 6 total", "red"),
        ("Tests:       6 passed, 6 total", "green"),
        ("  5 passing (20ms)\n  1 failing", "red"),
        ("  5 passing (20ms)", "green"),
        ("ok  \texample.com/pkg\t0.013s\nok  \texample.com/other\t(cached)", "green"),
        ("--- FAIL: TestLogin (0.00s)\nFAIL\texample.com/pkg\t0.014s", "red"),
        ("running 3 tests\ntest result: ok. 3 passed; 0 failed; 0 ignored", "green"),
        ("test result: FAILED. 2 passed; 1 failed; 0 ignored", "red"),
        ("=== no tests ran in 0.01s ===", None),
        ("5 files in 2s", None),
        ("The file src/app.py was edited.", None),
    ],
)
def test_a_test_runners_summary_is_red_or_green(output: str, run: str | None) -> None:
    assert red_green.run_outcome(output) == run


def test_only_the_end_of_a_long_output_is_read() -> None:
    summary = "=== 1 failed in 0.1s ===\n"
    assert red_green.run_outcome(summary + "x" * red_green.TAIL_CHARS) is None
    assert red_green.run_outcome("x" * red_green.TAIL_CHARS + "\n" + summary) == "red"


def test_a_run_is_compared_with_the_latest_run_before_the_answer() -> None:
    red, green = Turn("tool", "1 failed in 0.1s"), Turn("tool", "2 passed in 0.1s")
    turns = [Turn("user", "fix it"), Turn("assistant", "pytest"), red, Turn("assistant", "edit"), Turn("tool", "ok")]
    assert red_green.previous_run(turns, 3) == ("red", 2)
    assert red_green.previous_run(turns, 2) is None
    assert red_green.previous_run([*turns[:2], green, *turns[2:]], 5) == ("red", 3)
    assert red_green.answers_between(turns, 2, 3) == [3]
    assert red_green.answers_between(turns, 0, 4) == [1, 3]
    many = [Turn("tool", "1 failed in 0.1s")] + [Turn("assistant", "edit")] * (red_green.MAX_BETWEEN + 5)
    assert red_green.answers_between(many, 0, len(many) - 1) == list(range(6, len(many)))
    assert red_green.results_run([Turn("tool", "ok"), green]) == "green"
    assert red_green.results_run([green, red]) == "red"
    assert red_green.results_run([Turn("tool", "ok")]) is None


def test_a_tests_report_needs_a_change_of_colour() -> None:
    went_green = red_green.tests_report("demo", "a" * 32, "b" * 32, "red", "green", SCALE)
    broke = red_green.tests_report("demo", "a" * 32, "b" * 32, "green", "red", SCALE)
    assert went_green is not None and went_green.source == "tests" and went_green.content["score"] == 2.0
    assert broke is not None and broke.content["score"] == -1.0
    for before, now in (("red", "red"), ("green", "green"), (None, "green"), ("red", None)):
        assert red_green.tests_report("demo", "a" * 32, "b" * 32, before, now, SCALE) is None  # type: ignore[arg-type]
    assert (
        red_green.tests_report("demo", "a" * 32, "b" * 32, "red", "green", dataclasses.replace(ON, tests="off")) is None
    )


def test_only_a_client_that_left_interrupts() -> None:
    assert interrupted({"complete": False, "error": "client disconnected"})
    assert not interrupted({"complete": False, "error": "upstream SSE ended without a terminal event"})
    assert not interrupted({"complete": False, "error": "reef shut down before the stream ended"})
    assert not interrupted({"complete": True, "error": None})
    draft = interruption_report("demo", "a" * 32, "b" * 32, SCALE)
    assert draft is not None and draft.source == "interruption" and draft.content["score"] == -1.0
    assert interruption_report("demo", "a" * 32, "b" * 32, dataclasses.replace(ON, interruption="off")) is None


def test_a_retry_sends_the_earlier_request_again() -> None:
    chat = "/v1/chat/completions"
    asked = {"messages": [{"role": "user", "content": "hi"}]}
    answer = {"parts": [{"type": "text", "text": "yo"}]}
    earlier = read_request("demo\ns1", chat, asked, answer)
    assert read_request("demo\ns1", chat, asked, answer).prefixes[-1] == earlier.prefixes[-1]
    assert read_request("demo\ns2", chat, asked, answer).prefixes[-1] != earlier.prefixes[-1]
    went_on = {"messages": [*asked["messages"], {"role": "assistant", "content": "yo"}]}
    assert read_request("demo\ns1", chat, went_on, None).prefixes[0] == earlier.prefixes[-1]
    draft = retry_report("demo", "a" * 32, "b" * 32, SCALE)
    assert draft is not None and draft.source == "retry" and draft.content["score"] == -1.0
    assert retry_report("demo", "a" * 32, "b" * 32, dataclasses.replace(ON, retry="off")) is None
