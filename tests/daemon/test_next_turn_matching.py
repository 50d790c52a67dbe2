"""Which record a next turn's verdict lands on: the one whose answer the later request carries, compared by
fingerprint. A regenerated answer, a shared opener or an invented history never moves a verdict onto another
record; untagged conversations interleaved in one scenario are each matched; the memory that makes matching
possible is bounded in bytes, and what it let go or could not match is counted. Reading a next message, however
long or odd, never stalls the daemon."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from rich.console import Console

from reef_cli.render.status import status_view
from reef_daemon.reports import next_turn as next_turn_module
from reef_daemon.reports.agent_markup import without_agent_markup
from reef_daemon.reports.next_turn import SignalCounts
from reef_daemon.reports.turns import Reading, Turn, next_turn, read_request
from tests.daemon.test_next_turn import WITH_PATH, WITHOUT_PATH, judged_reef, next_turn_reports
from tests.support.app_servers import AppServers
from tests.support.fake_judge import FakeJudge
from tests.support.reef_testing import Reef, StartReef
from tests.support.waiting import eventually

OPENER = "Where is the login handled?"


async def chat(reef: Reef, messages: list[dict[str, Any]], say: str, session: str | None = None) -> tuple[str, str]:
    """One chat completion of `messages` (the upstream answers `say`, told outside the conversation, so the same
    turns can get different answers, as a regenerate does); its receipt and the answer."""
    headers = {"x-reef-tag-session": session} if session else {}
    body = {"model": "fake-model", "messages": messages, "user": f"REEF-SAY[{say}]"}
    response = await reef.post("/v1/chat/completions", body, scenario="demo", headers=headers)
    assert response.status == 200, await response.text()
    answer = (await response.json())["choices"][0]["message"]["content"]
    return response.headers["x-reef-agent-record-id"], answer


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


async def verdict_on(reef: Reef, record_id: str) -> str:
    (report,) = await eventually(lambda: next_turn_reports(reef, record_id), 60, f"a next-turn report on {record_id}")
    verdict: str = report["evidence"]["verdict"]
    return verdict


def counts_of(reef: Reef) -> SignalCounts:
    assert reef.daemon.next_turn is not None
    return reef.daemon.next_turn.counts


async def settled(reef: Reef, turns: int) -> None:
    """Wait until `turns` next turns were judged or found to continue no kept answer."""
    counts = counts_of(reef)

    async def done() -> int:
        return counts.judged + counts.no_judgment + counts.over_bounds + counts.unmatched

    await eventually(done, 60, f"{turns} next turns settled", satisfied=lambda n: n >= turns)


async def test_a_regenerated_answer_gets_the_verdict_and_the_thrown_away_one_none(
    start_reef: StartReef, app_servers: AppServers
) -> None:
    judge = FakeJudge()
    reef = await judged_reef(start_reef, app_servers, judge)
    thrown_away, _ = await chat(reef, [user(OPENER)], WITHOUT_PATH, session="s")
    kept, answer = await chat(reef, [user(OPENER)], WITH_PATH, session="s")  # the same turns, asked again

    await chat(reef, [user(OPENER), assistant(answer), user("Thanks, next: task 2")], "Done.", session="s")

    assert await verdict_on(reef, kept) == "accepted"
    await settled(reef, 1)
    assert await next_turn_reports(reef, thrown_away) == []
    asked = [call["payload"]["messages"][-1]["content"] for call in judge.received]
    # One verdict, on the kept answer; and the retry's two answers ranked against each other.
    assert sum('"user_next_message"' in question for question in asked) == 1
    assert sum('"attempts"' in question for question in asked) == 1


async def test_two_users_with_the_same_opener_get_their_own_verdicts(
    start_reef: StartReef, app_servers: AppServers
) -> None:
    reef = await judged_reef(start_reef, app_servers, FakeJudge())
    first, first_answer = await chat(reef, [user(OPENER)], WITH_PATH)
    second, second_answer = await chat(reef, [user(OPENER)], WITHOUT_PATH)

    # The second user answers first; neither carries a session tag.
    await chat(reef, [user(OPENER), assistant(second_answer), user("No, which file? Then: task 2")], "Done.")
    await chat(reef, [user(OPENER), assistant(first_answer), user("Thanks, next: task 2")], "Done.")

    assert await verdict_on(reef, first) == "accepted"
    assert await verdict_on(reef, second) == "corrected"


async def test_a_replayed_history_with_an_invented_answer_scores_no_record(
    start_reef: StartReef, app_servers: AppServers
) -> None:
    judge = FakeJudge()
    reef = await judged_reef(start_reef, app_servers, judge)
    victims, answer = await chat(reef, [user(OPENER)], WITH_PATH)

    invented = [user(OPENER), assistant("The login is nowhere."), user("This is useless.")]
    await chat(reef, invented, "Done.")
    await settled(reef, 1)
    assert counts_of(reef).unmatched == 1 and judge.received == []

    await chat(reef, [user(OPENER), assistant(answer), user("Thanks, next: task 2")], "Done.")
    assert await verdict_on(reef, victims) == "accepted"
    shown = (await (await reef.get("/reef/status")).json())["next_turn"]
    assert shown["unmatched"] == 1 and shown["judged"] == 1


async def test_six_interleaved_untagged_conversations_are_each_judged(
    start_reef: StartReef, app_servers: AppServers
) -> None:
    reef = await judged_reef(start_reef, app_servers, FakeJudge())
    answers = [WITH_PATH if number % 2 else WITHOUT_PATH for number in range(6)]
    openers = [f"Task {number}: where is the login handled?" for number in range(6)]
    first = [await chat(reef, [user(opener)], said) for opener, said in zip(openers, answers, strict=True)]

    for opener, (_, answer) in zip(openers, first, strict=True):
        reply = "Thanks, next: more" if answer == WITH_PATH else "No, which file? Then: more"
        await chat(reef, [user(opener), assistant(answer), user(reply)], "Done.")

    for record_id, answer in first:
        assert await verdict_on(reef, record_id) == ("accepted" if answer == WITH_PATH else "corrected")
    assert counts_of(reef).unmatched == 0


async def test_the_memory_of_answers_is_bounded_in_bytes_and_what_it_lets_go_is_counted(
    start_reef: StartReef, app_servers: AppServers
) -> None:
    reef = await judged_reef(start_reef, app_servers, FakeJudge(), reports__next_turn_memory="8K")
    # A long conversation costs the memory no more than a short one: an answer is kept by its key, not its turns.
    # (Its answers were never recorded here: it continues none that is kept.)
    long_history = [user(f"step {number}") if number % 2 == 0 else assistant("ok") for number in range(5001)]
    await chat(reef, long_history, "Done.")
    await eventually(lambda: _kept_bytes(reef), 60, "the long conversation's answer kept", satisfied=lambda b: b > 0)
    assert counts_of(reef).kept_bytes < 1024

    long_answer = WITH_PATH + " " + "More detail. " * 40
    first = [await chat(reef, [user(f"Task {number}: where?")], long_answer) for number in range(20)]
    for number, (_, answer) in reversed(list(enumerate(first))):  # the newest first, while they are kept
        await chat(reef, [user(f"Task {number}: where?"), assistant(answer), user("Thanks, next: more")], "Done.")
    await settled(reef, 21)

    shown = (await (await reef.get("/reef/status")).json())["next_turn"]
    assert shown["judged"] > 0 and shown["unmatched"] > 1
    assert shown["judged"] + shown["unmatched"] == 21
    assert shown["forgotten"] > shown["unmatched"]  # each answer let go, and the long conversation's
    assert shown["kept_bytes"] <= 8 * 1024
    # The newest answers were kept and judged, the oldest let go.
    assert await verdict_on(reef, first[-1][0]) == "accepted"
    assert await next_turn_reports(reef, first[0][0]) == []
    console = Console(record=True, width=300)
    console.print(status_view(await (await reef.get("/reef/status")).json(), "http://reef"))
    line = next(line for line in console.export_text().splitlines() if line.startswith("signals"))
    assert f"{shown['forgotten']} answers let go for reports.next-turn-memory" in line
    assert f"{shown['unmatched']} next turns that matched no kept answer" in line


async def test_a_next_message_is_read_off_the_event_loop(
    start_reef: StartReef, app_servers: AppServers, monkeypatch: pytest.MonkeyPatch
) -> None:
    reef = await judged_reef(start_reef, app_servers, FakeJudge())
    pasted = "Thanks, " + "<a>" * 33_334  # 100k characters of tags that never close
    reading, released, read = threading.Event(), threading.Event(), threading.Event()

    def held_read(seed: str, route: str, request: Any, answer: Any) -> Reading:
        if pasted in str(request):
            reading.set()
            released.wait(30)
            read.set()
        return read_request(seed, route, request, answer)

    monkeypatch.setattr(next_turn_module, "read_request", held_read)
    record_id, answer = await chat(reef, [user(OPENER)], WITH_PATH)
    await chat(reef, [user(OPENER), assistant(answer), user(pasted)], "Done.")
    assert await asyncio.to_thread(reading.wait, 60)

    health = await reef.get("/healthz")  # answered while the pasted message is being read
    assert health.status == 200 and not read.is_set()
    released.set()
    assert await verdict_on(reef, record_id) == "accepted"


def test_markup_is_taken_out_in_one_pass_of_a_pasted_megabyte() -> None:
    # Read by one regular expression, each of these takes minutes: every opening tag reads on to the end.
    unclosed = "<a>" * 350_000
    assert without_agent_markup(unclosed) == unclosed
    assert without_agent_markup(unclosed + "</a>") == ""
    attributes = "<a " * 350_000
    assert without_agent_markup(attributes + ">x</a>") == "<a " * 349_999
    reminder = "<system-reminder>Keep going.</system-reminder>"
    assert without_agent_markup(f"{reminder} Thanks <b>, {reminder}next") == " Thanks <b>, next"


def test_a_next_message_is_read_to_its_bound_and_up_to_the_next_answer() -> None:
    said = next_turn([Turn("user", "x" * 200_000), Turn("assistant", "ok"), Turn("user", "later")], 1000)
    assert (said.kind, said.text) == ("user", "x" * 1000)
    reminder = Turn("user", "<system-reminder>" + "<a>" * 50_000 + "</system-reminder>")
    assert next_turn([reminder, Turn("assistant", "ok"), Turn("user", "later")], 1_000_000).kind == "agent"


def test_a_later_request_is_keyed_by_the_answer_it_carries_whatever_the_api() -> None:
    answer = {
        "parts": [
            {"type": "thinking", "text": "hm"},
            {"type": "text", "text": "I will edit it. "},
            {"type": "tool_call", "id": "c1", "name": "edit", "arguments": '{"path": "a.py", "line": 3}'},
        ]
    }
    first = read_request("demo\n", "/v1/messages", {"messages": [user("fix it")]}, answer)
    said_back = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hm", "signature": "x"},
            {"type": "text", "text": "I will edit it."},
            {"type": "tool_use", "id": "toolu_9", "name": "edit", "input": {"line": 3, "path": "a.py"}},
        ],
    }
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "ok"}]}
    later = read_request("demo\n", "/v1/messages", {"messages": [user("fix it"), said_back, result]}, None)
    assert later.continued == [(first.key, 1)]
    responses = [
        {"type": "message", "role": "user", "content": "fix it"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "I will edit it."}]},
        {"type": "function_call", "call_id": "c1", "name": "edit", "arguments": '{"line":3,"path":"a.py"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]
    assert read_request("demo\n", "/v1/responses", {"input": responses}, None).continued == [(first.key, 1)]
    other_call = {**said_back, "content": [*said_back["content"][:2], {**said_back["content"][2], "input": {}}]}
    changed = read_request("demo\n", "/v1/messages", {"messages": [user("fix it"), other_call, result]}, None)
    assert changed.continued[0][0] != first.key
    searched = {"parts": [{"type": "tool_call", "id": "s1", "name": "web_search", "arguments": '{"query": "x"}'}]}
    search = read_request("demo\n", "/v1/messages", {"messages": [user("look it up")]}, searched)
    server_call = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}}
    sent_back = [user("look it up"), {"role": "assistant", "content": [server_call]}, user("thanks")]
    assert read_request("demo\n", "/v1/messages", {"messages": sent_back}, None).continued == [(search.key, 1)]
    carried = {"messages": [user("fix it"), said_back, result]}
    elsewhere = read_request("demo\nother-session", "/v1/messages", carried, None)
    assert elsewhere.continued[0][0] != first.key


def test_a_long_answer_sent_back_with_other_spacing_is_the_same_answer() -> None:
    words = [f"word{number}" for number in range(40_000)]  # several pieces of respacing
    answer = {"parts": [{"type": "text", "text": " ".join(words) + "\n"}]}
    first = read_request("demo\n", "/v1/chat/completions", {"messages": [user("go")]}, answer)
    for spaced in ("\n".join(words), "  ".join(words).strip(), " ".join(words[:-1]) + "  "):
        messages = [user("go"), assistant(spaced), user("ok")]
        later = read_request("demo\n", "/v1/chat/completions", {"messages": messages}, None)
        assert (later.continued[0][0] == first.key) is (spaced.split() == words)


async def _kept_bytes(reef: Reef) -> int:
    return counts_of(reef).kept_bytes
