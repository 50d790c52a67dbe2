"""A large request body is parsed in a worker thread: while it is read, the daemon keeps answering (/healthz)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from reef_daemon import jsonbody
from tests.support.reef_testing import CHAT, Reef

LONG_INTEGER = 12345678901234567890123  # beyond 64 bits: read by the standard library, exactly


def on_the_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def test_a_large_body_is_parsed_off_the_loop_and_healthz_answers_meanwhile(
    reef: Reef, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsing, release = threading.Event(), threading.Event()
    where: list[str] = []
    read_strictly = jsonbody._read_strictly

    def held(body: bytes, what: str, orjson_said: str) -> Any:
        where.append("loop" if on_the_loop() else "thread")
        parsing.set()
        if where[-1] == "thread":
            release.wait()
        return read_strictly(body, what, orjson_said)

    monkeypatch.setattr(jsonbody, "_read_strictly", held)
    filler = "a long prompt " * 50_000  # 700 KB
    body = {**CHAT, "messages": [{"role": "user", "content": filler}], "seed": LONG_INTEGER}
    sent = asyncio.create_task(reef.post("/v1/chat/completions", data=json.dumps(body).encode()))
    try:
        parse_began = asyncio.ensure_future(asyncio.to_thread(parsing.wait))
        await asyncio.wait([sent, parse_began], return_when=asyncio.FIRST_COMPLETED)
        assert where == ["thread"]
        health = await reef.get("/healthz")
        assert health.status == 200  # answered while the body is still being parsed
    finally:
        parsing.set()
        release.set()
    response = await sent
    assert response.status == 200, await response.text()
    (row,) = await reef.records()
    assert (await reef.record(row["id"]))["request"]["seed"] == LONG_INTEGER
