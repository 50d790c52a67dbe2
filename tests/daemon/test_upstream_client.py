"""The upstream client against raw HTTP servers: kept-alive connections, a connection the upstream closed while it
sat idle, bodies framed every way HTTP allows, a reader slower than the upstream, compression, and what it refuses
to send."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from reef_daemon.runtimes.http_client import BUFFER_HIGH_BYTES, HttpClient, Origin, UpstreamError
from tests.support.waiting import eventually

Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class RawServer:
    """An HTTP server written by hand: each test says which bytes go back."""

    def __init__(self, answer: Serve) -> None:
        self.answer = answer
        self.connections = 0
        self.requests: list[bytes] = []
        self._server: asyncio.Server | None = None

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.answer(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def read_request(self, reader: asyncio.StreamReader) -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
        )
        request = head + await reader.readexactly(length)
        self.requests.append(request)
        return request

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


StartServer = Callable[[Serve], Awaitable[tuple[RawServer, Origin]]]


@pytest.fixture
async def raw_server() -> AsyncIterator[StartServer]:
    servers: list[RawServer] = []

    async def start(answer: Serve) -> tuple[RawServer, Origin]:
        server = RawServer(answer)
        servers.append(server)
        return server, Origin.parse(await server.start())

    yield start
    for server in servers:
        await server.close()


def json_answer(body: bytes, *, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n%s" % (
        len(body), extra, body,
    )  # fmt: skip


async def post(client: HttpClient, origin: Origin, body: bytes = b'{"q":1}', **headers: str) -> tuple[int, bytes]:
    answer = await client.post(origin, "/v1/chat/completions", headers, body, connect_timeout_s=5, read_timeout_s=5)
    try:
        return answer.status, await answer.read()
    finally:
        answer.release()


async def test_requests_share_one_kept_alive_connection(raw_server: StartServer) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server.read_request(reader)
            writer.write(json_answer(b'{"n":%d}' % len(server.requests)))
            await writer.drain()

    server, origin = await raw_server(answer)
    client = HttpClient()
    for n in range(1, 6):
        assert await post(client, origin) == (200, b'{"n":%d}' % n)
    assert server.connections == 1
    client.close()


async def test_a_connection_the_upstream_closed_while_idle_is_replaced_without_failing_the_request(
    raw_server: StartServer,
) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(json_answer(b'{"ok":true}'))  # says keep-alive (HTTP/1.1), then closes anyway
        await writer.drain()

    server, origin = await raw_server(answer)
    client = HttpClient()
    assert await post(client, origin) == (200, b'{"ok":true}')
    kept = [connection for idle in client._idle.values() for connection in idle]
    await eventually(lambda: all(connection.closed for connection in kept), 30, "the client seeing the close")
    assert await post(client, origin) == (200, b'{"ok":true}')
    assert server.connections == 2 and len(server.requests) == 2


async def test_a_kept_alive_connection_that_breaks_before_any_answer_is_retried_once_on_a_new_one(
    raw_server: StartServer,
) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(json_answer(b'{"ok":true}'))
        await writer.drain()
        if server.connections == 1:
            await server.read_request(reader)  # the second request on this connection: dropped unanswered

    server, origin = await raw_server(answer)
    client = HttpClient()
    assert await post(client, origin) == (200, b'{"ok":true}')
    assert await post(client, origin) == (200, b'{"ok":true}')
    assert server.connections == 2 and len(server.requests) == 3


async def test_the_request_goes_to_the_upstream_path_with_its_host_and_length(raw_server: StartServer) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(json_answer(b"{}"))

    server, origin = await raw_server(answer)
    prefixed = Origin.parse(f"http://{origin.host_header}/openai/")
    await post(HttpClient(), prefixed, b'{"q":"\xc3\xa9"}', authorization="Bearer k")
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /openai/v1/chat/completions HTTP/1.1"
    assert f"Host: {origin.host_header}".encode() in lines
    assert b"authorization: Bearer k" in lines and b"Content-Length: 10" in lines
    assert body == b'{"q":"\xc3\xa9"}'


@pytest.mark.parametrize(
    "framing",
    ["chunked", "until-close"],
)
async def test_bodies_without_a_length_arrive_whole(raw_server: StartServer, framing: str) -> None:
    parts = [b'{"choices":', b'[{"message":', b'{"content":"hi"}}]}']

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        if framing == "chunked":
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
            for part in parts:
                writer.write(b"%x\r\n%s\r\n" % (len(part), part))
                await writer.drain()
                await asyncio.sleep(0.01)
            writer.write(b"0\r\n\r\n")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n" + b"".join(parts))
        await writer.drain()

    server, origin = await raw_server(answer)
    assert await post(HttpClient(), origin) == (200, b"".join(parts))


async def test_a_reader_slower_than_the_upstream_gets_every_byte(raw_server: StartServer) -> None:
    piece = bytes(range(256)) * 256  # 64 KiB
    count = 4 * BUFFER_HIGH_BYTES // len(piece)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % (len(piece) * count))
        for _ in range(count):
            writer.write(piece)
            await writer.drain()

    server, origin = await raw_server(answer)
    answer_ = await HttpClient().post(origin, "/v1/x", {}, b"{}", connect_timeout_s=5, read_timeout_s=5)
    received = bytearray()
    async for data in answer_.chunks():
        received += data
        await asyncio.sleep(0.001)  # slower than the socket: reading pauses and resumes
    answer_.release()
    assert received == piece * count


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
async def test_a_compressed_body_is_decoded_and_its_encoding_header_dropped(
    raw_server: StartServer, encoding: str
) -> None:
    text = b'{"answer":"' + b"Paris " * 5000 + b'"}'
    if encoding == "gzip":
        packed = gzip.compress(text)
    elif encoding == "deflate":
        packed = zlib.compress(text)
    else:
        squeezer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        packed = squeezer.compress(text) + squeezer.flush()
    name = b"gzip" if encoding == "gzip" else b"deflate"

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(json_answer(packed, extra=b"content-encoding: " + name + b"\r\n"))

    server, origin = await raw_server(answer)
    response = await HttpClient().post(origin, "/v1/x", {}, b"{}", connect_timeout_s=5, read_timeout_s=5)
    assert "Content-Encoding" not in response.headers
    assert await response.read() == text
    response.release()


async def test_an_encoding_reef_cannot_decode_is_a_clear_error(raw_server: StartServer) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(json_answer(b"\x00\x01", extra=b"content-encoding: br\r\n"))

    server, origin = await raw_server(answer)
    with pytest.raises(UpstreamError, match="Content-Encoding br, which reef does not decode"):
        await post(HttpClient(), origin)


async def test_a_header_that_would_split_the_request_is_not_sent(raw_server: StartServer) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)

    server, origin = await raw_server(answer)
    with pytest.raises(UpstreamError, match="holds a line break"):
        await HttpClient().post(
            origin, "/v1/x", {"x-note": "a\r\nx-injected: 1"}, b"{}", connect_timeout_s=5, read_timeout_s=5
        )
    assert server.requests == []


async def test_an_answer_that_is_not_http_and_one_that_stops_are_errors(raw_server: StartServer) -> None:
    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"SMTP ready\r\n\r\n")

    server, origin = await raw_server(garbage)
    with pytest.raises(UpstreamError, match="not valid HTTP"):
        await post(HttpClient(), origin)

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{")
        await writer.drain()
        await asyncio.sleep(5)

    server, origin = await raw_server(silent)
    answer = await HttpClient().post(origin, "/v1/x", {}, b"{}", connect_timeout_s=5, read_timeout_s=0.3)
    with pytest.raises(UpstreamError, match=r"sent nothing within 0\.3 s") as raised:
        await answer.read()
    assert raised.value.timed_out
    answer.release()
