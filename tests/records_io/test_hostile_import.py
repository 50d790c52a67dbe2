"""Odd conversations and odd files on the way in: scores off the deployment's scale, negative durations,
non-text parts, a scenario imported again after its archive; and `reef import` of files whose lines break every
assumption (deep nesting, NaN, huge numbers, lone surrogates, odd shapes), of FIFOs and devices, and of large
transcripts in bounded memory."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from reef_transcripts.sessions import BadLine, Conversation, read_conversations
from reef_transcripts.sessions import items as session_items
from tests.support.cli_testing import Daemon
from tests.support.records_io_testing import InProcessReef, conversation


async def test_scores_off_the_scale_and_negative_durations_are_refused(reef: InProcessReef) -> None:
    ack = await reef.import_batch("scale", [
        conversation("huge", "x", score=1e300),
        conversation("negative", "x", score=-5),
        conversation("digits", "x", score=int("9" * 400)),
        conversation("slow", "x", duration_ms=-1),
        conversation("fine", "x", score=0.5, duration_ms=10),
    ])  # fmt: skip
    assert [r["reason"] for r in ack["results"]] == [
        "score 1e+300 is outside this deployment's scale: from 0 (worst) to 1 (best)",
        "score -5 is outside this deployment's scale: from 0 (worst) to 1 (best)",
        "score must be a finite number",
        "duration_ms must not be negative",
        None,
    ]
    rows = await reef.records("scale")
    assert sorted(row["type"] for row in rows) == ["inference", "report"]
    tasks = await reef.client.get("/reef/scenarios/scale/tasks")
    assert tasks.json()["replays"] == []  # nothing off the scale became a low score to replay


async def test_text_parts_are_kept_as_text_and_other_parts_refused(reef: InProcessReef) -> None:
    parts = [{"type": "text", "text": "Paris"}, {"type": "output_text", "text": "is the capital."}]
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    ack = await reef.import_batch("parts", [
        {"messages": [{"role": "user", "content": "Capital of France?"}, {"role": "assistant", "content": parts}]},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "What is this?"}, image]},
                      {"role": "assistant", "content": "A cat."}]},
    ])  # fmt: skip
    assert [r["status"] for r in ack["results"]] == ["imported", "refused"]
    assert ack["results"][1]["reason"] == (
        "messages[0].content[1] is a image_url part; reef imports text parts only (text, input_text, output_text)"
    )
    [line] = await reef.export("parts")
    assert line["messages"][-1] == {"role": "assistant", "content": "Paris\nis the capital."}


def test_reef_import_refuses_an_image_part_in_a_chat_file_instead_of_an_empty_turn(tmp_path: Path) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    lines = [
        {"messages": [{"role": "user", "content": [image]}, {"role": "assistant", "content": "A cat."}]},
        {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]},
    ]
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps(line) + "\n" for line in lines))
    refused, kept = list(read_conversations(chat))
    assert refused == BadLine(
        str(chat),
        1,
        "messages[0].content[0] is a image_url part; reef imports text parts only (text, input_text, output_text)",
    )
    assert isinstance(kept, Conversation) and kept.line == 2


async def test_a_scenario_imported_again_after_its_archive_is_whole_again(reef: InProcessReef) -> None:
    batch = [conversation("q1", "a1", score=1.0), conversation("q2", "a2")]
    first = await reef.import_batch("again", batch)
    assert first["imported"] == 2
    assert (await reef.client.delete("/reef/scenarios/again")).status_code == 200
    second = await reef.import_batch("again", batch)
    assert (second["imported"], second["duplicate"]) == (2, 0)
    assert {r["id"] for r in second["results"]}.isdisjoint({r["id"] for r in first["results"]})
    assert [line["messages"][0]["content"] for line in await reef.export("again")] == ["q1", "q2"]
    third = await reef.import_batch("again", batch)
    assert (third["imported"], third["duplicate"]) == (0, 2)
    assert [r["id"] for r in third["results"]] == [r["id"] for r in second["results"]]


def codex_rollout(base_instructions: Any) -> list[str]:
    meta = {
        "timestamp": "2026-01-01T00:00:00Z",
        "type": "session_meta",
        "payload": {"id": "s1", "base_instructions": base_instructions},
    }
    items = [
        {"type": "message", "role": {}, "content": [{"type": "input_text", "text": "odd"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hello?"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi."}]},
    ]
    lines = [meta] + [{"timestamp": "2026-01-01T00:00:01Z", "type": "response_item", "payload": p} for p in items]
    return [json.dumps(line) for line in lines]  # fmt: skip


def test_hostile_lines_are_reported_and_the_rest_imported(daemon: Daemon, tmp_path: Path) -> None:
    good = json.dumps(conversation("Capital of Spain?", "Madrid."))
    chat = tmp_path / "chat.jsonl"
    chat.write_text("\n".join([
        good,
        "[" * 100_000 + "]" * 100_000,
        '{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "score": NaN}',
        '{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "score": Infinity}',
        '{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "created_at": NaN}',
        '{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "score": '
        + "9" * 400 + "}",
        '{"messages": [{"role": "user", "content": "\\ud800"}, {"role": "assistant", "content": "a"}]}',
        json.dumps({"messages": [{"role": "user", "content": "calls"},
                                 {"role": "assistant", "content": "x", "tool_calls": True}]}),
        json.dumps({"messages": [{"role": {}, "content": "q"}, {"role": "assistant", "content": "a"}]}),
        json.dumps(conversation("Capital of Peru?", "Lima.", score=-5)),
        json.dumps(conversation("Capital of Chile?", "Santiago.")),
    ]) + "\n")  # fmt: skip
    codex = tmp_path / "rollout.jsonl"
    codex.write_text("\n".join(codex_rollout("You are terse.")) + "\n")

    done = daemon.reef("import", str(chat), str(codex), "--scenario", "hostile", "--json")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    said = [json.loads(line) for line in done.stdout.splitlines()]
    refused = [(line["line"], line["error"]) for line in said if "error" in line]
    assert [where for where, _ in refused] == [2, 3, 4, 5, 6, 7, 9, 10]
    reasons = dict(refused)
    assert reasons[2] == "the line is nested too deeply to read"
    assert reasons[3] == reasons[4] == reasons[6] == "score must be a finite number"
    assert reasons[5] == "`created_at` must be a time (ISO 8601 or epoch seconds)"
    assert reasons[7] == "the line holds a lone surrogate (\\ud800-\\udfff), which is not text"
    assert reasons[9] == "every message must be an object with a `role`"
    assert reasons[10].startswith("score -5 is outside this deployment's scale")
    assert said[-1] == {"imported": 4, "duplicate": 0, "refused": 8}
    rows = daemon.get("/reef/records", scenario="hostile", type="inference")["records"]
    assert len(rows) == 4

    exported = daemon.reef("export", "--scenario", "hostile")
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    system = [line["messages"][0] for line in lines if line["messages"][0]["role"] == "system"]
    assert system == [{"role": "system", "content": "You are terse."}]  # base_instructions as a plain string


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_import_refuses_files_that_are_not_regular(daemon: Daemon, tmp_path: Path, kind: str) -> None:
    if kind == "fifo":
        path = tmp_path / "pipe.jsonl"
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    done = daemon.reef("import", str(path), "--scenario", "odd-files", timeout=60)
    assert done.returncode == 1
    assert f"reef: {path}: not a regular file (a pipe, device or socket); name session files or folders" in (
        done.stderr
    )


def test_a_large_transcript_is_read_in_bounded_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_items, "MAX_CONVERSATION_BYTES", 2 * 1024 * 1024)
    path = tmp_path / "pi.jsonl"
    with path.open("w") as out:
        out.write(json.dumps({"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00Z"}) + "\n")
        parent = None
        for i in range(400):  # 400 turns of 50 kB: 20 MB
            entry = {"type": "message", "id": f"e{i}", "parentId": parent, "timestamp": "2026-01-01T00:00:01Z",
                     "message": {"role": "user" if i % 2 == 0 else "assistant",
                                 "content": [{"type": "text", "text": "w" * 50_000}]}}  # fmt: skip
            out.write(json.dumps(entry) + "\n")
            parent = f"e{i}"
    tracemalloc.start()
    found = list(read_conversations(path))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert found == [BadLine(str(path), 0, "the conversation is larger than 2 MiB")]
    assert peak < 8 * 1024 * 1024

    small = tmp_path / "small.jsonl"
    small.write_text("\n".join(path.read_text().splitlines()[:5]) + "\n")
    [conversation_] = list(read_conversations(small))
    assert isinstance(conversation_, Conversation) and len(conversation_.messages) == 4


def test_refused_lines_are_said_in_the_order_of_the_file(daemon: Daemon, tmp_path: Path) -> None:
    # Line 2 is refused by the daemon (off the scale), line 3 before sending (NaN): still said as 2, then 3.
    chat = tmp_path / "chat.jsonl"
    chat.write_text("\n".join([
        json.dumps(conversation("Capital of Spain?", "Madrid.")),
        json.dumps(conversation("Capital of Peru?", "Lima.", score=7)),
        '{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "score": NaN}',
        json.dumps(conversation("Capital of Chile?", "Santiago.")),
    ]) + "\n")  # fmt: skip
    done = daemon.reef("import", str(chat), "--scenario", "ordered")
    assert done.returncode == 1, done.stderr
    said = [line for line in done.stderr.splitlines() if f"{chat}:" in line]
    assert [line.split(f"{chat}:")[1].split(":")[0] for line in said] == ["2", "3"], done.stderr
    assert "score 7 is outside this deployment's scale" in said[0]
