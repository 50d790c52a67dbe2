"""An upstream that compresses its answers: reef asks for plain bodies, decodes what comes compressed anyway, and
records, relays and hands out receipts as for any other upstream."""

from __future__ import annotations

import json
import re

import aiohttp
import pytest

from tests.support.fake_upstream import FakeUpstream
from tests.support.reef_testing import CHAT, Reef, StartReef

ROUTES = ["/v1/chat/completions", "/v1/responses", "/v1/messages"]


async def post_identity(reef: Reef, path: str, body: dict[str, object]) -> tuple[aiohttp.ClientResponse, bytes]:
    """A client that accepts only plain bodies and reads the bytes exactly as they came."""
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        response = await session.post(
            reef.url + path, json=body, headers={"x-reef-scenario": "demo", "Accept-Encoding": "identity"}
        )
        return response, await response.read()


@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize("encoding", ["deflate", "gzip"])
async def test_a_plain_answer_from_a_compressing_upstream(start_reef: StartReef, path: str, encoding: str) -> None:
    reef = await start_reef(FakeUpstream(encoding=encoding))
    response, raw = await post_identity(reef, path, CHAT)
    assert response.status == 200
    assert "Content-Encoding" not in response.headers
    assert "Paris" in json.dumps(json.loads(raw))
    record = await reef.record(response.headers["x-reef-agent-record-id"])
    assert record["complete"] is True and record["error"] is None
    assert record["usage"]["input_tokens"] == 12
    assert reef.upstream.received[-1].headers["Accept-Encoding"] == "identity"


@pytest.mark.parametrize("path", ROUTES)
async def test_a_stream_from_a_compressing_upstream(start_reef: StartReef, path: str) -> None:
    reef = await start_reef(FakeUpstream(encoding="deflate"))
    response, raw = await post_identity(reef, path, {**CHAT, "stream": True})
    assert response.status == 200
    assert "Content-Encoding" not in response.headers
    text = raw.decode()
    assert "Paris" in text and "upstream_incomplete" not in text
    receipts = re.findall(r'"agent_record_id":\s*"([0-9a-f]{32})"', text)
    assert len(receipts) == 1
    record = await reef.record(receipts[0])
    assert record["complete"] is True and record["error"] is None
    assert record["usage"]["input_tokens"] == 12
