"""The answer a record keeps: assembled when the exchange is recorded, and for records stored by an older reef
(schema version 3, no answer column) assembled once when the database is upgraded; change requests an older
reef stored as `train` records."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from reef_daemon.store import DATABASE_NAME
from reef_daemon.store.engines.schema import MIGRATIONS
from tests.support.reef_testing import CHAT, Reef, StartReef

OLD_STREAM = (
    'event: message_start\ndata: {"type":"message_start","message":{"model":"old-model",'
    '"usage":{"input_tokens":5,"output_tokens":1}}}\n\n'
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    '"content_block":{"type":"text","text":""}}\n\n'
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    '"delta":{"type":"text_delta","text":"Paris."}}\n\n'
    'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    '"usage":{"output_tokens":2}}\n\n'
    'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)
OLD_BODY = {
    "model": "old-model",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Lyon."}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 4, "completion_tokens": 3},
}


def write_version_3_database(state_dir: Path) -> None:
    state_dir.mkdir(parents=True)
    conn = sqlite3.connect(state_dir / DATABASE_NAME)
    for script in MIGRATIONS[:3]:
        assert isinstance(script, str)
        conn.executescript(script)
    conn.execute("PRAGMA user_version = 3")
    conn.execute("INSERT INTO scenarios VALUES ('demo', 'record', 'manual', 0, NULL, NULL)")
    stored_stream = {"stream": True, "status": 200, "complete": True, "body": OLD_STREAM,
                     "message": {"role": "assistant", "content": "Paris."}}  # fmt: skip
    rows = [
        (1, "a" * 32, "/v1/messages", 200, json.dumps(stored_stream).encode(), 5, 2),
        (2, "b" * 32, "/v1/chat/completions", 200, json.dumps(OLD_BODY).encode(), 4, 3),
        (3, "c" * 32, "/v1/chat/completions", 500, b'{"error": {"message": "the model crashed"}}', None, None),
    ]
    conn.executemany(
        "INSERT INTO records (sequence, id, scenario, type, created_at, route, status, complete, response,"
        " input_tokens, output_tokens) VALUES (?, ?, 'demo', 'inference', 0, ?, ?, 1, ?, ?, ?)",
        rows,
    )
    conn.commit()
    conn.close()


@pytest.mark.sqlite_file
async def test_records_stored_before_answers_get_theirs_on_upgrade(start_reef: StartReef, tmp_path: Path) -> None:
    write_version_3_database(tmp_path / "state")
    reef = await start_reef()

    streamed = await reef.record("a" * 32)
    assert streamed["answer"] == {
        "model": "old-model",
        "parts": [{"type": "text", "text": "Paris."}],
        "finish_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 2},
    }
    buffered = await reef.record("b" * 32)
    assert buffered["answer"]["parts"] == [{"type": "text", "text": "Lyon."}]
    assert (await reef.record("c" * 32))["answer"] is None

    response = await reef.post("/v1/chat/completions", CHAT)  # new records are stored next to the old ones
    fresh = await reef.record(response.headers["x-reef-agent-record-id"])
    assert fresh["sequence"] == 4 and fresh["answer"]["finish_reason"] == "stop"


async def test_a_report_has_no_answer(reef: Reef) -> None:
    response = await reef.post("/v1/chat/completions", CHAT)
    receipt = response.headers["x-reef-agent-record-id"]
    report = await reef.post("/reef/report", {"score": 1, "references": [receipt]})
    assert report.status == 200
    shown = await reef.record((await report.json())["agent_record_id"])
    assert shown["type"] == "report" and shown["answer"] is None


@pytest.mark.sqlite_file
async def test_change_requests_an_older_reef_stored_as_train_read_as_requests(
    start_reef: StartReef, tmp_path: Path
) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir(parents=True)
    conn = sqlite3.connect(state_dir / DATABASE_NAME)
    for migration in MIGRATIONS[:7]:
        if isinstance(migration, str):
            conn.executescript(migration)
        else:
            migration(conn)
    conn.execute("PRAGMA user_version = 7")
    conn.execute("INSERT INTO scenarios VALUES ('demo', 'record', 'manual', 0, NULL, NULL)")
    conn.execute(
        "INSERT INTO records (sequence, id, scenario, type, created_at, body, content_hash)"
        " VALUES (1, 'req-old', 'demo', 'train', 0, ?, 'h')",
        (json.dumps({"text": "answer briefly"}),),
    )
    conn.commit()
    conn.close()
    reef = await start_reef()

    (row,) = await reef.records(type="request")
    assert (row["id"], row["type"]) == ("req-old", "request")
    assert await reef.records(type="train") == [row]  # the type's old name still filters
    assert (await reef.record("req-old"))["text"] == "answer briefly"


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses", "/v1/messages"])
async def test_a_streamed_record_read_right_after_its_receipt_holds_its_answer(reef: Reef, path: str) -> None:
    """A stream's answer and first words are assembled before its receipt goes out: the first read has them."""
    response = await reef.post(path, {**CHAT, "stream": True})
    [receipt] = re.findall(r'"agent_record_id":\s*"([0-9a-f]{32})"', await response.text())
    record = await reef.record(receipt)
    assert "Paris" in " ".join(part.get("text", "") for part in record["answer"]["parts"])
    [row] = [row for row in await reef.records() if row["id"] == receipt]
    assert row["preview"] == record["preview"] and "Paris" in row["preview"]["answered"]
