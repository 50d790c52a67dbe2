"""Records made through the proxy by the real SDKs, scored, exported as `openai` and imported into a new daemon:
the same conversations (tool calls included) with the same scores, marked as imported; importing again adds
nothing; the export loads as a dataset of uniform lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import openai

from tests.support.cli_testing import Daemon

SCENARIO = "round-trip"
WEATHER_TOOL = {
    "name": "weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def make_records(daemon: Daemon) -> list[str]:
    """Three exchanges through the three APIs, each with a tool call and its result in the history."""
    headers = {"x-reef-scenario": SCENARIO}
    with (
        openai.OpenAI(base_url=f"{daemon.url}/v1", api_key="k", default_headers=headers, max_retries=0) as chat,
        anthropic.Anthropic(base_url=daemon.url, api_key="k", default_headers=headers, max_retries=0) as claude,
    ):
        return _ask_three(chat, claude)


def _ask_three(chat: openai.OpenAI, claude: anthropic.Anthropic) -> list[str]:
    answered = chat.chat.completions.with_raw_response.create(
        model="fake-model",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Paris"}'}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ],
        tools=[{"type": "function", "function": WEATHER_TOOL}],
    )  # fmt: skip
    messaged = claude.messages.with_raw_response.create(
        model="fake-model",
        max_tokens=64,
        system="Answer in one line.",
        messages=[
            {"role": "user", "content": "Weather in Rome?"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Rome"}},
            ]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "rain"}]},
        ],
        tools=[{"name": "weather", "description": "The weather in a city.",
                "input_schema": WEATHER_TOOL["parameters"]}],
    )  # fmt: skip
    responded = chat.responses.with_raw_response.create(
        model="fake-model",
        instructions="Be kind.",
        input=[
            {"role": "user", "content": "Weather in Oslo?"},
            {"type": "function_call", "call_id": "fc_1", "name": "weather", "arguments": '{"city":"Oslo"}'},
            {"type": "function_call_output", "call_id": "fc_1", "output": "snow"},
        ],
    )
    return [reply.headers["x-reef-agent-record-id"] for reply in (answered, messaged, responded)]


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_scored_proxy_records_survive_export_and_import(daemon: Daemon, other_daemon: Daemon, tmp_path: Path) -> None:
    receipts = make_records(daemon)
    for receipt, score in zip(receipts, (1.0, 0.25, 0.0), strict=True):
        daemon.post("/reef/report", {"score": score, "references": [receipt]}, scenario=SCENARIO)
    exported = tmp_path / "train.jsonl"
    done = daemon.reef("export", "--scenario", SCENARIO, "-o", str(exported))
    assert done.returncode == 0, done.stderr
    assert "exported 3 lines" in done.stderr
    lines = lines_of(exported)
    assert [line["score"] for line in lines] == [1.0, 0.25, 0.0]
    chat_line = lines[0]
    assert chat_line["messages"][2]["tool_calls"][0]["function"] == {"name": "weather", "arguments": '{"city":"Paris"}'}
    assert chat_line["messages"][3] == {"role": "tool", "content": "sunny", "tool_call_id": "call_1"}
    assert chat_line["messages"][-1] == {"role": "assistant", "content": "The capital of France is Paris."}
    assert chat_line["tools"] == [{"type": "function", "function": WEATHER_TOOL}]
    rome = lines[1]["messages"]
    assert rome[0] == {"role": "system", "content": "Answer in one line."}
    assert rome[2]["content"] == "Let me look." and rome[2]["tool_calls"][0]["id"] == "toolu_1"
    assert rome[3] == {"role": "tool", "tool_call_id": "toolu_1", "content": "rain"}
    oslo = lines[2]["messages"]
    assert oslo[0] == {"role": "system", "content": "Be kind."}
    assert oslo[2]["tool_calls"][0]["function"]["name"] == "weather" and oslo[3]["content"] == "snow"
    # Every line is an object with messages and score (tools where the exchange offered some): one table for
    # datasets.load_dataset("json", ...).
    assert {tuple(sorted(line)) for line in lines} == {("messages", "score", "tools"), ("messages", "score")}

    imported = other_daemon.reef("import", str(exported), "--scenario", SCENARIO)
    assert imported.returncode == 0, imported.stderr
    assert "imported 3, skipped 0 as duplicate, refused 0" in imported.stderr
    again = tmp_path / "again.jsonl"
    assert other_daemon.reef("export", "--scenario", SCENARIO, "-o", str(again)).returncode == 0
    assert lines_of(again) == lines

    rows = other_daemon.get("/reef/records", scenario=SCENARIO, type="inference")["records"]
    assert sorted(row["score"] for row in rows) == [0.0, 0.25, 1.0]
    record = other_daemon.record(rows[0]["id"])
    assert record["tags"]["imported"] == "openai" and record["reports"][0]["score"] == rows[0]["score"]
    shown = other_daemon.reef("show", rows[0]["id"])
    assert shown.returncode == 0 and "Oslo" in shown.stdout

    repeated = other_daemon.reef("import", str(exported), "--scenario", SCENARIO, "--json")
    assert repeated.returncode == 0, repeated.stderr
    *each, counts = [json.loads(line) for line in repeated.stdout.splitlines()]
    assert counts == {"imported": 0, "duplicate": 3, "refused": 0}
    assert [(r["line"], r["status"]) for r in each] == [(1, "duplicate"), (2, "duplicate"), (3, "duplicate")]
    assert {r["id"] for r in each} == {row["id"] for row in rows}  # the receipts of the stored records
    assert len(other_daemon.get("/reef/records", scenario=SCENARIO)["records"]) == 6  # 3 records, 3 reports
