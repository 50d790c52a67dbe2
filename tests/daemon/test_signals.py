"""Signals that need no judge model, on by default: a daemon with every default (no judge URL, no flag) in front of
an upstream that is no judge scores an answer from what follows it in the session: the user's plain words, the same
request sent again, a stream the user cut off, a tool call that failed, a test run that went from red to green.
Each is a report of its own source on the exact record it concerns, and `reef status` counts them per source."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from reef_cli.render.status import status_view
from tests.daemon.test_next_turn import judged_reef
from tests.support.app_servers import AppServers
from tests.support.fake_judge import FakeJudge
from tests.support.fake_upstream import FakeUpstream
from tests.support.reef_testing import Reef, StartReef
from tests.support.simulated_user import SimulatedUser
from tests.support.waiting import eventually

ANSWER = "The login is handled by the auth module."


async def reports_of(reef: Reef, record_id: str) -> dict[str, float]:
    """The derived reports on a record, by source: their scores."""
    shown = await reef.record(record_id)
    return {report["source"]: report["score"] for report in shown["reports"]}


async def reported(reef: Reef, record_id: str, source: str) -> float:
    """The score the `source` report on `record_id` gives, once it is there."""
    found = await eventually(
        lambda: reports_of(reef, record_id), 60, f"a {source} report on {record_id}", satisfied=lambda r: source in r
    )
    return found[source]


def tool_result(content: str, says: str) -> dict[str, Any]:
    """A chat `tool` message; its last line tells the fake upstream what to answer next."""
    return {"role": "tool", "tool_call_id": "call-1", "content": f"{content}\nREEF-SAY[{says}]"}


async def test_plain_words_score_the_answer_low_and_high_with_no_judge(start_reef: StartReef) -> None:
    reef = await start_reef()
    user = SimulatedUser(reef, "session-words")
    wrong = await user.turn("Where is the login handled?", ANSWER)
    right = await user.turn("No, that is wrong.", "It is in src/auth/login.py.")
    await user.turn("Thanks, that works.", "Glad to help.")

    assert await reported(reef, wrong, "words") == 0.0
    assert await reported(reef, right, "words") == 1.0
    assert (await reef.record(right))["source"] == "words"
    # Nothing was asked of a judge: every call the upstream got is one of the user's three.
    assert len(reef.upstream.received) == 3
    status = (await (await reef.get("/reef/status")).json())["next_turn"]
    assert status["reports"] == {"words": 2} and status["judged"] == 0
    console = Console(record=True, width=200)
    console.print(status_view(await (await reef.get("/reef/status")).json(), "http://reef"))
    lines = console.export_text().splitlines()
    assert next(line for line in lines if line.startswith("signals")).split() == ["signals", "words", "2"]
    assert not [line for line in lines if line.startswith("next turn")]  # no judge, no judge's line


async def test_the_judge_reads_only_what_the_words_rules_left_open(
    start_reef: StartReef, app_servers: AppServers
) -> None:
    judge = FakeJudge()
    reef = await judged_reef(start_reef, app_servers, judge, reports__words="on")
    user = SimulatedUser(reef, "session-both")
    thanked = await user.turn("Where is the login handled?", "It is in src/auth/login.py.")
    unclear = await user.turn("Thanks, that works. And the logout?", ANSWER)
    await user.turn("Next: where is the logout?", "Done.")

    assert await reported(reef, thanked, "words") == 1.0
    assert await reported(reef, unclear, "next-turn") == 1.0  # the scripted judge accepts a move to the next task
    assert "words" not in await reports_of(reef, unclear)
    (asked,) = judge.received
    assert "Next: where is the logout?" in asked["payload"]["messages"][1]["content"]


async def test_the_same_request_again_scores_the_earlier_answer_low(start_reef: StartReef) -> None:
    reef = await start_reef()
    user = SimulatedUser(reef, "session-retry")
    await user.turn("Where is the login handled?", ANSWER)
    first = await user.turn("And the logout?", ANSWER)
    user.messages.pop()  # the client throws the answer away and asks again
    second = await user.send()

    assert await reported(reef, first, "retry") == 0.0
    # Only the thrown-away answer: the one that replaced it, and the one before, have none.
    assert "retry" not in await reports_of(reef, second)
    assert "retry" not in await reports_of(reef, user.receipts[0])
    # The same request in another session is no retry, nor the same request twice with no session at all.
    other = SimulatedUser(reef, "session-other")
    await other.turn("Where is the login handled?", ANSWER)
    body = {"model": "fake-model", "messages": user.messages[:1]}
    unsessioned = [await reef.post("/v1/chat/completions", body) for _ in range(2)]
    # Records are read in order: once the session's next retry is scored, the ones before it were read.
    user.messages.pop()
    await user.send()
    assert await reported(reef, second, "retry") == 0.0
    assert (await _counts(reef)).get("retry") == 2
    assert "retry" not in await reports_of(reef, user.receipts[0])
    assert "retry" not in await reports_of(reef, unsessioned[0].headers["x-reef-agent-record-id"])


async def test_a_retrys_two_answers_are_ranked_against_each_other_by_the_judge(
    start_reef: StartReef, app_servers: AppServers
) -> None:
    """With the next-turn judge on, the answer sent again and the one that replaced it are a group of answers to one
    prompt: the judge ranks them (a `judge` report on each); the thrown-away one keeps its `retry` score."""
    judge = FakeJudge()
    reef = await judged_reef(start_reef, app_servers, judge)
    user = SimulatedUser(reef, "session-group")
    first = await user.turn("Where is the login handled?", ANSWER)
    user.messages.pop()  # asked again, the same messages; the fake upstream answers this time with a file's path
    again = {"model": "fake-model", "messages": user.messages, "user": "REEF-SAY[It is in src/auth/login.py.]"}
    response = await reef.post("/v1/chat/completions", again, headers={"x-reef-tag-session": "session-group"})
    second = response.headers["x-reef-agent-record-id"]

    assert await reported(reef, second, "judge") == 1.0  # the scripted judge ranks an answer citing a file first
    reports = await reports_of(reef, first)
    assert reports["retry"] == 0.0 and reports["judge"] == 0.1
    assert (await reef.record(first))["score"] == 0.0  # a retry speaks before a judge
    (ranking,) = [asked for asked in judge.received if "attempts" in asked["payload"]["messages"][-1]["content"]]
    assert "src/auth/login.py" in ranking["payload"]["messages"][-1]["content"]


async def test_a_failed_tool_call_scores_the_answer_that_made_it_low(start_reef: StartReef) -> None:
    reef = await start_reef()
    user = SimulatedUser(reef, "session-tool")
    ran = await user.turn("Run the script", "Running python main.py.")
    user.messages.append(tool_result("Traceback (most recent call last):\n  File main.py\nKeyError: 'x'", "Fixing."))
    fixed = await user.send()
    user.messages.append(tool_result("Exit code: 0\nOutput: done", "It runs now."))
    await user.send()

    assert await reported(reef, ran, "tool-error") == 0.0
    await eventually(lambda: _counts(reef), 60, "the second result read", satisfied=lambda c: bool(c))
    assert "tool-error" not in await reports_of(reef, fixed)


async def test_a_test_run_from_red_to_green_scores_the_answers_since_the_red_run_high(start_reef: StartReef) -> None:
    """The edit that fixed the tests and the answer that ran them again both score high; the answer that ran the
    red run, before the fix, gets nothing from it; a run of the same colour again scores nothing."""
    reef = await start_reef()
    user = SimulatedUser(reef, "session-tests")
    await user.turn("Make the tests pass", "Running pytest.")
    user.messages.append(tool_result("F..\n==== 1 failed, 2 passed in 0.12s ====", "Editing src/app.py."))
    edited = await user.send()
    user.messages.append(tool_result("The file src/app.py was edited.", "Running pytest again."))
    green = await user.send()
    user.messages.append(tool_result("...\n==== 3 passed in 0.10s ====", "Running pytest once more."))
    again = await user.send()
    user.messages.append(tool_result("...\n==== 3 passed in 0.11s ====", "All tests pass."))
    last = await user.send()
    await user.turn("Thanks, that works.", "Glad to help.")

    # Requests are read in order: once the last answer's words are scored, every run before it was read.
    assert await reported(reef, last, "words") == 1.0
    assert (await reports_of(reef, green))["tests"] == 1.0
    assert (await reports_of(reef, edited))["tests"] == 1.0
    assert (await reef.record(green))["source"] == "tests"
    assert (await _counts(reef))["tests"] == 2
    assert "tests" not in await reports_of(reef, user.receipts[0])
    assert "tests" not in await reports_of(reef, again)


async def test_a_stream_the_user_cut_off_then_a_new_request_scores_low(start_reef: StartReef) -> None:
    reef = await start_reef(FakeUpstream(delay_ms=50))
    session = {"x-reef-tag-session": "session-cut"}
    asked = [{"role": "user", "content": "Write the whole module"}]
    response = await reef.post(
        "/v1/chat/completions", {"model": "fake-model", "messages": asked, "stream": True}, headers=session
    )
    await response.content.readany()
    response.close()  # the user stops the answer after its first words
    (cut,) = await eventually(reef.records, 60, "the cut stream's record")
    assert (await reef.record(cut["id"]))["complete"] is False
    again = [*asked, {"role": "user", "content": "Only the parser, please"}]
    answered = await reef.post("/v1/chat/completions", {"model": "fake-model", "messages": again}, headers=session)
    assert answered.status == 200

    assert await reported(reef, cut["id"], "interruption") == 0.0


async def _counts(reef: Reef) -> dict[str, int]:
    status = (await (await reef.get("/reef/status")).json())["next_turn"]
    return dict(status["reports"])
