"""A store that cannot write (a full disk) answers 503 `store_failed` on every route that writes; a stream that has
begun ends with an error frame inside its own protocol instead of a second HTTP response inside its body."""

from __future__ import annotations

import sqlite3

import pytest

from reef_daemon.errors import StoreError
from tests.support.reef_testing import CHAT, Reef

BIG = "x" * 400_000  # more than the free pages the database has


async def fill_the_disk(reef: Reef) -> None:
    """Cap the database at the pages it has now: the next write that needs a new page fails as on a full disk."""
    await reef.daemon.store.writer.submit(lambda ctx: ctx.conn.execute("PRAGMA max_page_count = 1"))


def big_chat(stream: bool) -> dict[str, object]:
    return {**CHAT, "messages": [{"role": "user", "content": BIG}], "stream": stream}


async def test_a_commit_that_fails_raises_store_error(reef: Reef) -> None:
    await fill_the_disk(reef)

    def insert_big(ctx: object) -> None:
        assert hasattr(ctx, "conn")
        conn: sqlite3.Connection = ctx.conn
        conn.execute("INSERT INTO events (sequence, type, created_at, data) VALUES (?, 'x', 0, ?)", (10**9, BIG))

    with pytest.raises(StoreError):
        await reef.daemon.store.writer.submit(insert_big, fallible=False)
    with pytest.raises(StoreError):
        await reef.daemon.store.writer.submit(insert_big)


async def test_inference_on_a_full_disk(reef: Reef) -> None:
    assert (await reef.post("/v1/chat/completions", CHAT)).status == 200
    await fill_the_disk(reef)
    response = await reef.post("/v1/chat/completions", big_chat(stream=False))
    assert response.status == 503
    assert (await response.json())["error"]["type"] == "store_failed"
    assert len(await reef.records()) == 1


async def test_a_stream_on_a_full_disk_ends_with_an_error_frame(reef: Reef) -> None:
    assert (await reef.post("/v1/chat/completions", CHAT)).status == 200
    await fill_the_disk(reef)
    response = await reef.post("/v1/chat/completions", big_chat(stream=True))
    assert response.status == 200
    text = (await response.read()).decode()  # the stream ends
    assert "HTTP/1.1" not in text
    assert '"type":"store_failed"' in text.replace(" ", "") and "agent_record_id" not in text
    assert len(await reef.records()) == 1


async def test_a_report_on_a_full_disk_is_503(reef: Reef) -> None:
    response = await reef.post("/v1/chat/completions", CHAT)
    receipt = response.headers["x-reef-agent-record-id"]
    await fill_the_disk(reef)
    response = await reef.post("/reef/report", {"score": 1, "feedback": BIG, "references": [receipt]})
    assert response.status == 503
    assert (await response.json())["error"]["type"] == "store_failed"
    assert [row["type"] for row in await reef.records()] == ["inference"]
