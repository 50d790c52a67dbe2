"""A shutdown with a never-ending model stream in flight ends it after a bounded drain, tells the client why, and
records the stream as cut."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import aiohttp
import pytest

from reef_daemon import app
from tests.support.reef_testing import CHAT, StartReef


@pytest.mark.sqlite_file
async def test_a_shutdown_cuts_a_never_ending_stream(
    start_reef: StartReef, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app, "STREAM_DRAIN_S", 0.5)
    reef = await start_reef()
    assert reef.server.runner is not None
    reef.server.runner.server.handler_cancellation = False  # as under `reef serve`
    response = await reef.post("/v1/chat/completions", {**CHAT, "stream": True}, headers={"x-fake-delay-ms": "3600000"})
    assert response.status == 200
    await response.content.readuntil(b"\n\n")  # the stream has begun, and then the upstream goes quiet

    await asyncio.wait_for(reef.server.close(), 20)  # well before the wait gives up

    rest = b""
    try:
        while chunk := await asyncio.wait_for(response.content.readany(), 20):
            rest += chunk
    except aiohttp.ClientPayloadError:
        pass  # a stream cut short may end without its last chunk; what came before it is what counts
    assert b"shutting_down" in rest
    with sqlite3.connect(tmp_path / "state" / "reef.sqlite3") as conn:
        rows = conn.execute("SELECT complete, error FROM records").fetchall()
    assert rows == [(0, "reef shut down before the stream ended")]
