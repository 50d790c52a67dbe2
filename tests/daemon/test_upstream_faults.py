"""Upstream faults: the client gets a clear error, the record says what happened, reef keeps serving."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass, field

import anthropic
import openai
import pytest
from aiohttp import web

from tests.support.fake_upstream import FakeUpstream
from tests.support.reef_testing import CHAT, Reef, StartReef
from tests.support.waiting import eventually


async def only_record(reef: Reef) -> dict[str, object]:
    rows = await reef.records()
    assert len(rows) == 1
    return await reef.record(str(rows[0]["id"]))


async def still_serving(reef: Reef) -> None:
    response = await reef.post("/v1/chat/completions", CHAT)
    assert response.status == 200 and response.headers["x-reef-agent-record-id"]


async def test_refused_connection(start_reef: StartReef) -> None:
    with socket.socket() as probe:  # a port with nobody listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    reef = await start_reef(inference__upstream_url=f"http://127.0.0.1:{port}")
    response = await reef.post("/v1/chat/completions", CHAT)
    assert response.status == 502
    error = (await response.json())["error"]
    assert error["type"] == "upstream_unreachable" and f"127.0.0.1:{port}" in error["message"]
    record = await only_record(reef)
    assert record["status"] == 502 and record["complete"] is False
    assert "cannot reach the upstream" in str(record["error"])


async def test_upstream_500_becomes_502_with_its_body(reef: Reef) -> None:
    response = await reef.post("/v1/chat/completions", CHAT, headers={"x-fake-fault": "500"})
    assert response.status == 502
    assert "the model crashed" in await response.text()
    record = await only_record(reef)
    assert record["status"] == 500 and "500" in str(record["error"])
    await still_serving(reef)


async def test_upstream_429_is_relayed_with_its_body(reef: Reef) -> None:
    async with openai.AsyncOpenAI(
        base_url=reef.url + "/v1",
        api_key="k",
        max_retries=0,
        default_headers={"x-reef-scenario": "demo", "x-fake-fault": "429"},
    ) as client:
        with pytest.raises(openai.RateLimitError) as raised:
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert "slow down" in str(raised.value)
    record = await only_record(reef)
    assert record["status"] == 429


async def test_timeout(start_reef: StartReef) -> None:
    reef = await start_reef(inference__timeout_s="0.5")
    response = await reef.post("/v1/chat/completions", CHAT, headers={"x-fake-fault": "slow"})
    assert response.status == 502
    error = (await response.json())["error"]
    assert error["type"] == "upstream_timeout" and "0.5 s" in error["message"]
    record = await only_record(reef)
    assert "did not answer within" in str(record["error"])
    await still_serving(reef)


async def test_stream_cut_midway(reef: Reef) -> None:
    async with anthropic.AsyncAnthropic(
        base_url=reef.url,
        api_key="k",
        max_retries=0,
        default_headers={"x-reef-scenario": "demo", "x-fake-fault": "cut"},
    ) as client:
        with pytest.raises(anthropic.APIError) as raised:
            async for _event in await client.messages.create(
                model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}], stream=True
            ):
                pass
    assert "upstream" in str(raised.value)
    record = await only_record(reef)
    assert record["complete"] is False
    assert "broke" in str(record["error"]) or "without a terminal" in str(record["error"])
    response = record["response"]
    assert isinstance(response, dict) and "message_start" in response["body"]
    await still_serving(reef)


async def test_stream_without_terminal_frame_leaves_incomplete_record_and_no_receipt(reef: Reef) -> None:
    body = {**CHAT, "stream": True}
    response = await reef.post("/v1/chat/completions", body, headers={"x-fake-fault": "no-terminal"})
    text = await response.text()
    assert "agent_record_id" not in text
    assert "upstream SSE ended without a terminal event" in text
    record = await only_record(reef)
    assert record["complete"] is False
    assert record["error"] == "upstream SSE ended without a terminal event"


async def test_client_disconnect_mid_stream_is_recorded(start_reef: StartReef) -> None:
    reef = await start_reef(FakeUpstream(delay_ms=50))
    response = await reef.post("/v1/chat/completions", {**CHAT, "stream": True})
    await response.content.readany()
    response.close()  # the client walks away after the first bytes
    rows = await eventually(reef.records, 60, "the abandoned stream's record")
    record = await reef.record(str(rows[0]["id"]))
    assert record["complete"] is False and record["error"] == "client disconnected"
    await still_serving(reef)


@dataclass
class HeadFirst(FakeUpstream):
    """An upstream that sends a stream's head, then nothing until told (a model slow to its first token)."""

    go: asyncio.Event = field(default_factory=asyncio.Event)

    async def _stream(
        self, request: web.Request, frames: list[str], fault: str | None, delay_ms: float, terminal: int
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await self.go.wait()
        for frame in frames:
            await response.write(frame.encode())
        await response.write_eof()
        return response


async def test_a_stream_begins_for_its_client_before_a_slow_upstream_sends_a_frame(start_reef: StartReef) -> None:
    upstream = HeadFirst()
    reef = await start_reef(upstream)
    response = await asyncio.wait_for(reef.post("/v1/chat/completions", {**CHAT, "stream": True}), 30)
    assert response.status == 200 and response.content_type == "text/event-stream"  # no frame has come yet
    upstream.go.set()
    body = await response.read()
    assert b"data: [DONE]" in body and b"agent_record_id" in body
