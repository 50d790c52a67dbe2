"""A client that leaves before its answer starts still leaves a record, and the record says the client left."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.support.fake_upstream import FakeUpstream
from tests.support.reef_testing import CHAT, Reef, StartReef
from tests.support.waiting import eventually


async def serving_as_reef_serve_does(start_reef: StartReef) -> Reef:
    """A reef whose upstream holds its answers, and whose handlers run on when their client leaves, as under
    `reef serve` (aiohttp's test server cancels them instead)."""
    reef = await start_reef(FakeUpstream(hold=asyncio.Event()))
    assert reef.server.runner is not None
    reef.server.runner.server.handler_cancellation = False
    return reef


async def leave_before_the_answer(reef: Reef, body: dict[str, Any]) -> None:
    """Send a request, hang up while the upstream holds its answer, then let the upstream answer."""
    host, port = reef.url.removeprefix("http://").split(":")
    _reader, writer = await asyncio.open_connection(host, int(port))
    data = json.dumps(body).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nx-reef-scenario: demo\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    )
    writer.write(head.encode() + data)
    await writer.drain()
    await eventually(lambda: reef.upstream.received, 60, "the request to reach the upstream")
    writer.close()
    await writer.wait_closed()
    assert reef.server.runner is not None
    server = reef.server.runner.server
    assert reef.upstream.hold is not None
    try:
        await eventually(
            lambda: all(conn.transport is None for conn in server.connections), 10, "reef to see the client leave"
        )
    finally:
        reef.upstream.hold.set()


@pytest.mark.parametrize("stream", [True, False])
async def test_a_client_that_leaves_before_the_first_byte_is_recorded(start_reef: StartReef, stream: bool) -> None:
    reef = await serving_as_reef_serve_does(start_reef)
    await leave_before_the_answer(reef, {**CHAT, "stream": stream})
    rows = await eventually(reef.records, 60, "a record of the abandoned exchange")
    record = await reef.record(rows[0]["id"])
    assert record["complete"] is False and record["error"] == "client disconnected"
