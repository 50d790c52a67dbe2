"""The first words of an exchange that lists show: the last user message with text and the start of the answer,
kept when the exchange is recorded, and given once to records stored by an older reef."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reef_contract import CHAT_ROUTE, MESSAGES_ROUTE, PREVIEW_CHARS, RESPONSES_ROUTE, Answer
from reef_daemon.records import preview
from tests.daemon.test_stored_answers import write_version_3_database
from tests.support.reef_testing import CHAT, Reef, StartReef


def answer(*parts: dict[str, object]) -> Answer:
    return {"model": "m", "parts": list(parts), "finish_reason": "stop", "usage": {}}  # type: ignore[typeddict-item]


def test_the_last_user_message_with_text_is_what_was_asked() -> None:
    request = {"messages": [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "", "tool_calls": []},
        {"role": "user", "content": [{"type": "text", "text": "fix the\n  failing   test"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
    ]}  # fmt: skip
    words = preview(MESSAGES_ROUTE, json.dumps(request).encode(), answer({"type": "text", "text": "Done."}))
    assert words == {"asked": "fix the failing test", "answered": "Done."}


def test_responses_input_as_text_or_items() -> None:
    plain = json.dumps({"input": "hello"}).encode()
    assert preview(RESPONSES_ROUTE, plain, None) == {"asked": "hello", "answered": None}
    items = {"input": [{"role": "user", "content": [{"type": "input_text", "text": "hi there"}]},
                       {"type": "function_call_output", "call_id": "c", "output": "42"}]}  # fmt: skip
    assert preview(RESPONSES_ROUTE, json.dumps(items).encode(), None) == {"asked": "hi there", "answered": None}


def test_an_answer_with_only_tool_calls_names_them_and_long_text_is_clipped() -> None:
    call = {"type": "tool_call", "id": "c1", "name": "bash", "arguments": '{"cmd": "ls"}'}
    request = json.dumps({"messages": [{"role": "user", "content": "x" * 500}]}).encode()
    words = preview(CHAT_ROUTE, request, answer(call))
    assert words is not None and words["answered"] == '→ bash({"cmd": "ls"})'
    assert words["asked"] is not None and len(words["asked"]) == PREVIEW_CHARS and words["asked"].endswith("…")


def test_nothing_to_show_is_no_preview() -> None:
    assert preview(CHAT_ROUTE, b"not json", None) is None


async def test_a_recorded_exchange_is_listed_with_its_first_words(reef: Reef) -> None:
    response = await reef.post("/v1/chat/completions", CHAT)
    receipt = response.headers["x-reef-agent-record-id"]
    [row] = [row for row in await reef.records() if row["id"] == receipt]
    assert row["preview"]["asked"] == "What is the capital of France?"
    assert row["preview"]["answered"]
    report = await reef.post("/reef/report", {"score": 1, "references": [receipt]})
    [listed] = [row for row in await reef.records() if row["id"] == (await report.json())["agent_record_id"]]
    assert "preview" not in listed


@pytest.mark.sqlite_file
async def test_records_stored_before_previews_get_theirs_on_upgrade(start_reef: StartReef, tmp_path: Path) -> None:
    write_version_3_database(tmp_path / "state")
    reef = await start_reef()
    rows = {row["id"]: row for row in await reef.records()}
    assert rows["a" * 32]["preview"] == {"asked": None, "answered": "Paris."}
    assert "preview" not in rows["c" * 32]  # an error: no words
