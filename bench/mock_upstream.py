"""A near-zero-cost OpenAI-compatible upstream for the proxy benchmarks.

Raw asyncio Protocol + the httptools request parser on uvloop, so the mock costs a few µs per request and is
never what limits a measurement. `POST .../chat/completions` answers a fixed chat.completion; with
`"stream": true` in the body it answers 20 SSE `data:` chunks (one HTTP chunk each) and `data: [DONE]`.
Anything else gets 404. Listens on 127.0.0.1 only.

    python bench/mock_upstream.py --port 18000 [--chunk-delay-ms 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from typing import cast

import httptools
import uvloop

MODEL = "mock"
STREAM_CHUNKS = 20

_COMPLETION = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1700000000,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello from the mock upstream."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16},
    },
    separators=(",", ":"),
).encode()


def _chunk(index: int) -> bytes:
    delta = {"role": "assistant", "content": ""} if index == 0 else {"content": f"token{index} "}
    finish = "stop" if index == STREAM_CHUNKS - 1 else None
    body = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    event = b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(event), event)  # one HTTP chunk per SSE event


_NON_STREAM_RESPONSE = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(_COMPLETION) + _COMPLETION
)
_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)
_STREAM_CHUNKS = [_chunk(i) for i in range(STREAM_CHUNKS)]
_DONE = b"data: [DONE]\n\n"
_STREAM_TAIL = b"%x\r\n%s\r\n0\r\n\r\n" % (len(_DONE), _DONE)
_STREAM_RESPONSE = _STREAM_HEAD + b"".join(_STREAM_CHUNKS) + _STREAM_TAIL
_NOT_FOUND = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"


class MockProtocol(asyncio.Protocol):
    """One keep-alive connection; requests are answered in order, as HTTP/1.1 requires."""

    def __init__(self, chunk_delay_s: float) -> None:
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._url = b""
        self._body: list[bytes] = []
        self._chunk_delay_s = chunk_delay_s
        self._paced: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass it

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            if self._transport is not None:
                self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._url = b""
        self._body = []

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        transport = self._transport
        if transport is None:
            return
        if not self._url.endswith(b"/chat/completions"):
            transport.write(_NOT_FOUND)
            return
        body = b"".join(self._body)
        streaming = b'"stream":true' in body.replace(b" ", b"")
        if not streaming:
            transport.write(_NON_STREAM_RESPONSE)
        elif self._chunk_delay_s <= 0:
            transport.write(_STREAM_RESPONSE)
        else:
            self._paced = asyncio.ensure_future(self._paced_stream(transport))

    async def _paced_stream(self, transport: asyncio.Transport) -> None:
        transport.write(_STREAM_HEAD)
        for chunk in _STREAM_CHUNKS:
            transport.write(chunk)
            await asyncio.sleep(self._chunk_delay_s)
        transport.write(_STREAM_TAIL)


async def serve(port: int, chunk_delay_ms: float) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: MockProtocol(chunk_delay_ms / 1000), "127.0.0.1", port, backlog=1024, reuse_address=True
    )
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    print(f"mock upstream on http://127.0.0.1:{port}", flush=True)
    async with server:
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--chunk-delay-ms", type=float, default=0.0, help="pause between stream chunks")
    args = parser.parse_args()
    uvloop.run(serve(args.port, args.chunk_delay_ms))


if __name__ == "__main__":
    main()
