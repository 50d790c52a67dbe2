"""A client that sends slowly cannot hold a connection: unfinished headers and a never-ending body are cut off."""

from __future__ import annotations

import asyncio

import pytest

from reef_daemon import app, jsonbody
from tests.support.reef_testing import Reef, StartReef


async def connect(reef: Reef) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = reef.url.removeprefix("http://").split(":")
    return await asyncio.open_connection(host, int(port))


async def test_unfinished_headers_are_cut_off(start_reef: StartReef, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app, "HEADER_READ_TIMEOUT_S", 0.5)
    reef = await start_reef()
    reader, writer = await connect(reef)
    writer.write(b"POST /reef/report HTTP/1.1\r\nHost: reef\r\nx-reef-scenario: demo\r\n")
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 20) == b""  # closed, well before the wait gives up
    writer.close()


@pytest.mark.parametrize("path", ["/reef/report", "/v1/chat/completions"])
async def test_a_never_ending_body_is_refused(reef: Reef, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    monkeypatch.setattr(jsonbody, "BODY_READ_TIMEOUT_S", 0.5)
    reader, writer = await connect(reef)
    head = f"POST {path} HTTP/1.1\r\nHost: reef\r\nx-reef-scenario: demo\r\nTransfer-Encoding: chunked\r\n\r\n"
    writer.write(head.encode() + b'5\r\n{"a":\r\n')
    await writer.drain()
    answer = await asyncio.wait_for(reader.readuntil(b"request_timeout"), 20)
    assert answer.startswith(b"HTTP/1.1 408") and b"Connection: close" in answer
    writer.close()
    assert await reef.records() == []
