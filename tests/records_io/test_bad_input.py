"""Bad input to import and export: clear errors, never a 5xx, a refused conversation leaves nothing behind while
its good neighbours are kept, and `reef import` names the file and line of every bad line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli_testing import Daemon
from tests.support.records_io_testing import InProcessReef, conversation


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"not json", "not valid JSON"),
        (b'{"records": 5}', '{"records": [conversation, ...]}'),
        (b"[]", "must be a JSON object"),
        (json.dumps({"records": [conversation("q", "a")] * 1001}).encode(), "at most 1000"),
    ],
)
async def test_a_malformed_batch_is_refused_whole(reef: InProcessReef, body: bytes, words: str) -> None:
    response = await reef.client.post("/reef/records/batch", content=body, headers={"x-reef-scenario": "bad"})
    assert response.status_code == 400 and words in response.json()["error"]["message"]
    assert await reef.records("bad") == []


async def test_a_batch_keeps_good_conversations_and_refuses_bad_ones_by_index(reef: InProcessReef) -> None:
    batch = [
        conversation("first", "one", score=1),
        {"messages": []},
        {"messages": [{"role": "user", "content": "no answer"}]},
        "a string",
        conversation("scored badly", "x", score="0.8"),
        {"messages": [{"role": "wizard", "content": "?"}, {"role": "assistant", "content": "!"}]},
        {**conversation("extra", "field"), "colour": "red"},
        conversation("last", "two", created_at=1.7e12),
        conversation("second", "two", feedback="fine"),
    ]
    ack = await reef.import_batch("mixed", batch)
    assert [r["status"] for r in ack["results"]] == ["imported"] + ["refused"] * 7 + ["imported"]
    reasons = [r["reason"] for r in ack["results"][1:8]]
    assert reasons == [
        "messages must be a non-empty list",
        "the last message must be the assistant's answer",
        "a conversation must be a JSON object, not str",
        "score must be a number, not text: write 0.8 without quotes",
        "messages[0] must be an object with a role (system, developer, user, assistant, tool)",
        "unknown field colour; a conversation has messages, format, model, tools, created_at, duration_ms, "
        "session, score, feedback",
        "created_at must be seconds since the epoch",
    ]
    assert (ack["imported"], ack["duplicate"], ack["refused"]) == (2, 0, 7)
    rows = await reef.records("mixed")
    assert sorted(row["type"] for row in rows) == ["inference", "inference", "report", "report"]


async def test_a_batch_over_the_body_limit_is_a_413(reef: InProcessReef) -> None:
    big = [conversation("q" * 500_000, f"a{i}") for i in range(5)]  # ~2.5 MB against a 2 MiB limit
    response = await reef.client.post("/reef/records/batch", json={"records": big}, headers={"x-reef-scenario": "big"})
    assert response.status_code == 413
    assert await reef.records("big") == []


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({}, "name the scenario"),
        ({"scenario": "s", "format": "parquet"}, "format must be one of openai, preference, tokens"),
        ({"scenario": "s", "since": "last tuesday"}, "since must be a date"),
        ({"scenario": "s", "min_score": "high"}, "min_score must be a number"),
        ({"scenario": "a/b"}, "scenario names"),
    ],
)
async def test_bad_export_queries_say_what_is_wrong(reef: InProcessReef, params: dict[str, str], words: str) -> None:
    response = await reef.client.get("/reef/export", params=params)
    assert response.status_code == 400 and words in response.json()["error"]["message"]


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_import_reports_each_bad_line_and_keeps_the_good_ones(daemon: Daemon, tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    good = json.dumps(conversation("Capital of Spain?", "Madrid.", score=0.5))
    write_lines(folder / "a.jsonl", [
        good,
        "{not json",
        "[1, 2]",
        json.dumps({"messages": "hello"}),
        "",
        json.dumps(conversation("Capital of Italy?", "Rome.")),
    ])  # fmt: skip
    write_lines(folder / "b.jsonl", [json.dumps({"hello": "world"})])
    huge = json.dumps(conversation("x" * (17 * 1024 * 1024), "long"))
    write_lines(folder / "c.jsonl", [json.dumps(conversation("Capital of Peru?", "Lima.")), huge, good])
    (folder / "notes.txt").write_text("not a session")

    done = daemon.reef("import", str(folder), str(tmp_path / "missing.jsonl"), "--scenario", "bad-lines")
    assert done.returncode == 1
    said = done.stderr.splitlines()
    assert f"reef: {folder / 'a.jsonl'}:2: not JSON" in "\n".join(said)
    assert any(line.startswith(f"reef: {folder / 'a.jsonl'}:3: a line must be a JSON object") for line in said)
    assert f"reef: {folder / 'a.jsonl'}:4: `messages` must be a non-empty list" in said
    assert any(line.startswith(f"reef: {folder / 'b.jsonl'}: not a known session format") for line in said)
    assert f"reef: {folder / 'c.jsonl'}:2: the line is longer than 16 MiB" in said
    assert f"reef: {tmp_path / 'missing.jsonl'}: no such file or directory" in said
    assert said[-1] == "imported 3, skipped 1 as duplicate, refused 6"
    rows = daemon.get("/reef/records", scenario="bad-lines", type="inference")["records"]
    assert len(rows) == 3

    wrong = daemon.reef("import", str(folder), "--scenario", "bad-lines", "--format", "parquet")
    assert wrong.returncode == 2 and "parquet" in wrong.stderr
    as_pi = daemon.reef("import", str(folder / "a.jsonl"), "--scenario", "bad-lines", "--format", "pi", "--json")
    assert as_pi.returncode == 1
    results = [json.loads(line) for line in as_pi.stdout.splitlines()]
    assert results[-1] == {"imported": 0, "duplicate": 0, "refused": 6}  # five lines, and no answer at all
    assert results[-2] == {"file": str(folder / "a.jsonl"), "line": 0, "error": "the session has no assistant answer"}
