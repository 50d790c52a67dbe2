"""An upstream's answer is bounded: one larger than inference.max-answer-mb fails its exchange, and a stream that
sends only keep-alive comments times out (comments do not count as events)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from aiohttp import web

from tests.support.fake_upstream import FakeUpstream
from tests.support.reef_testing import CHAT, Reef, StartReef

MIB = 1024 * 1024
CHUNK = 'data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"%s"}}]}\n\n' % ("x" * 4000)


@dataclass
class Endless(FakeUpstream):
    """An upstream whose answer never ends: content chunks (a model that repeats itself), or `: ping` comments."""

    pings_only: bool = False

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        payload = await request.json()
        streamed = payload.get("stream") is True
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream" if streamed else "application/json"})
        await response.prepare(request)
        if not streamed:
            await response.write(b'{"choices": [{"message": {"content": "')
        while True:
            if self.pings_only:
                await response.write(b": ping\n\n")
                await asyncio.sleep(0.05)  # a keep-alive every so often, as servers send them
            else:
                await response.write(CHUNK.encode() if streamed else b"x" * 4000)


async def only_record(reef: Reef) -> dict[str, object]:
    (row,) = await reef.records()
    return await reef.record(str(row["id"]))


async def test_a_stream_larger_than_the_limit_fails_its_exchange(start_reef: StartReef) -> None:
    reef = await start_reef(Endless(), inference__max_answer_mb=1)
    response = await asyncio.wait_for(reef.post("/v1/chat/completions", {**CHAT, "stream": True}), 60)
    text = await asyncio.wait_for(response.text(), 60)
    assert "upstream_too_large" in text and "inference.max-answer-mb" in text
    assert "agent_record_id" not in text
    record = await only_record(reef)
    assert record["complete"] is False and "larger than 1 MiB" in str(record["error"])
    assert len(json.dumps(record["response"])) < 2 * MIB  # what is kept is bounded too


async def test_an_answer_larger_than_the_limit_is_a_502_that_names_the_setting(start_reef: StartReef) -> None:
    reef = await start_reef(Endless(), inference__max_answer_mb=1)
    response = await asyncio.wait_for(reef.post("/v1/chat/completions", CHAT), 60)
    assert response.status == 502
    error = (await response.json())["error"]
    assert error["type"] == "upstream_too_large" and "inference.max-answer-mb" in error["message"]
    record = await only_record(reef)
    assert record["complete"] is False and "larger than 1 MiB" in str(record["error"])


async def test_a_stream_of_keep_alive_comments_only_times_out(start_reef: StartReef) -> None:
    reef = await start_reef(Endless(pings_only=True), inference__timeout_s=0.5)
    response = await asyncio.wait_for(reef.post("/v1/chat/completions", {**CHAT, "stream": True}), 60)
    text = await asyncio.wait_for(response.text(), 60)
    assert "upstream_timeout" in text and "only keep-alive comments" in text
    record = await only_record(reef)
    assert record["complete"] is False and "no event within 0.5 s" in str(record["error"])
