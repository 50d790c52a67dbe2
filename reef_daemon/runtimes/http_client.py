"""The upstream HTTP/1.1 client: keep-alive connections on asyncio protocols, parsed with httptools.

The proxy sends one POST per exchange and reads its answer whole or as it arrives; this does only that, and does it
with a few microseconds of Python per request instead of a general client's hundreds. Each wait (the connection,
the answer's head, every read of its body) is bounded by a timeout; a body the reader has not taken yet pauses the
socket past `BUFFER_HIGH_BYTES`; gzip and deflate bodies (an upstream that compresses though asked not to) are
decoded as they are read, at most `DECODE_PIECE_BYTES` at a time.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import zlib
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

import httptools
from multidict import CIMultiDict

BUFFER_HIGH_BYTES = 1 << 20  # received and not yet read: past this the socket is paused
DECODE_PIECE_BYTES = 1 << 20  # a compressed body is decoded at most this much at a time
IDLE_PER_ORIGIN = 64  # kept-alive connections kept per upstream origin


class UpstreamError(Exception):
    """The upstream could not be reached, or its answer broke off; `timed_out` when a wait ran out."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


@dataclass(frozen=True)
class Origin:
    """Where requests go: scheme, host and port, the Host header, and the path every route is appended to."""

    scheme: str
    host: str
    port: int
    host_header: str
    base_path: str

    @classmethod
    def parse(cls, url: str) -> Origin:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r} is not an http:// or https:// URL")
        default = 443 if parts.scheme == "https" else 80
        port = parts.port or default
        host = parts.hostname
        shown = f"[{host}]" if ":" in host else host
        header = shown if port == default else f"{shown}:{port}"
        return cls(parts.scheme, host, port, header, parts.path.rstrip("/"))


class _Connection(asyncio.Protocol):
    """One kept-alive connection; one exchange at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reused = False
        self._parser = httptools.HttpResponseParser(self)
        self._answer: UpstreamResponse | None = None
        self._head: list[tuple[str, str]] = []
        self._writable: asyncio.Future[None] | None = None

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._break(UpstreamError(f"the upstream's answer is not valid HTTP ({exc})"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        answer = self._answer
        if answer is not None and not answer.complete:
            if answer.headers_received and answer.ends_at_close:
                answer.finish(keep_alive=False)  # a body without a length ends when the connection does
            else:
                answer.fail(UpstreamError("the upstream closed the connection before its answer was complete"))
        if self._writable is not None and not self._writable.done():
            self._writable.set_exception(ConnectionResetError("the upstream closed the connection"))

    def pause_writing(self) -> None:
        self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._head = []
        if self._answer is not None:
            self._answer.began = True

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head.append((name.decode("latin-1"), value.decode("utf-8", "replace")))

    def on_headers_complete(self) -> None:
        if self._answer is not None:
            self._answer.receive_head(self._parser.get_status_code(), self._head)

    def on_body(self, body: bytes) -> None:
        if self._answer is not None:
            self._answer.feed(body)

    def on_message_complete(self) -> None:
        if self._answer is not None:
            self._answer.finish(keep_alive=self._parser.should_keep_alive())

    # the exchange
    async def send(self, head: bytes, body: bytes, answer: UpstreamResponse) -> None:
        assert self.transport is not None
        self._answer = answer
        self.transport.write(head + body if len(body) < 65536 else head)
        if len(body) >= 65536:
            self.transport.write(body)
        if self._writable is not None:
            await self._writable

    def detach(self) -> None:
        self._answer = None

    def pause_reading(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _break(self, error: UpstreamError) -> None:
        if self._answer is not None:
            self._answer.fail(error)
        self.close()


class UpstreamResponse:
    """An answer being received: its status and headers once they came, its body as it arrives."""

    def __init__(self, client: HttpClient, origin: Origin, connection: _Connection, read_timeout_s: float) -> None:
        self._client = client
        self._origin = origin
        self._connection = connection
        self._loop = connection._loop
        self._read_timeout_s = read_timeout_s
        self.status = 0
        self.headers: CIMultiDict[str] = CIMultiDict()
        self.began = False  # any byte of the answer arrived (a request that failed before this may be retried)
        self.headers_received = False
        self.ends_at_close = False
        self.complete = False
        self._keep_alive = False
        self._pieces: collections.deque[bytes] = collections.deque()
        self._buffered = 0
        self._paused = False
        self._error: UpstreamError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._decoder: zlib._Decompress | None = None
        self._encoding = ""
        self._released = False

    # fed by the connection
    def receive_head(self, status: int, head: list[tuple[str, str]]) -> None:
        self.status = status
        self.headers = CIMultiDict(head)
        framing = self.headers.get("Transfer-Encoding", "").lower()
        self.ends_at_close = "Content-Length" not in self.headers and "chunked" not in framing
        self._encoding = self.headers.get("Content-Encoding", "").strip().lower()
        self.headers_received = True
        self._wake()

    def feed(self, data: bytes) -> None:
        self._pieces.append(data)
        self._buffered += len(data)
        if self._buffered > BUFFER_HIGH_BYTES and not self._paused:
            self._paused = True
            self._connection.pause_reading()
        self._wake()

    def finish(self, *, keep_alive: bool) -> None:
        self.complete = True
        self._keep_alive = keep_alive
        self._wake()

    def fail(self, error: UpstreamError) -> None:
        if self._error is None and not self.complete:
            self._error = error
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # read by the caller
    async def _wait(self, what: str) -> None:
        waiter = self._waiter = self._loop.create_future()
        timer = self._loop.call_later(self._read_timeout_s, self._time_out, waiter, what)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def _time_out(self, waiter: asyncio.Future[None], what: str) -> None:
        if not waiter.done():
            waiter.set_exception(UpstreamError(f"{what} within {self._read_timeout_s:g} s", timed_out=True))

    async def wait_head(self) -> None:
        while not self.headers_received:
            if self._error is not None:
                raise self._error
            await self._wait("the upstream did not answer")
        if self._encoding in ("gzip", "x-gzip"):
            self._decoder = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif self._encoding and self._encoding not in ("identity", "deflate"):
            raise UpstreamError(
                f"the upstream answered with Content-Encoding {self._encoding}, which reef does not decode "
                "(it asks for identity)"
            )
        if self._encoding:
            del self.headers["Content-Encoding"]  # the body is relayed decoded

    async def _next_raw(self) -> bytes | None:
        """The bytes received since the last call (waiting for some), or None at the end of the body."""
        while not self._pieces:
            if self._error is not None:
                raise self._error
            if self.complete:
                return None
            await self._wait("the upstream sent nothing")
        # Everything received so far, at once: the relay then writes it to its client in one go, not a write per
        # HTTP chunk (an upstream sends an SSE event per chunk, and many arrive in one read).
        data = self._pieces.popleft() if len(self._pieces) == 1 else b"".join(self._pieces)
        self._pieces.clear()
        self._buffered = 0
        if self._paused:
            self._paused = False
            self._connection.resume_reading()
        return data

    def body_at_hand(self) -> bool:
        """Whether body bytes were received and not read yet (the next read returns them without waiting)."""
        return bool(self._pieces)

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        """The body as it arrives (decoded when it came compressed)."""
        while (data := await self._next_raw()) is not None:
            if self._encoding in ("", "identity"):
                yield data
                continue
            for piece in self._decode(data):
                yield piece
        if self._decoder is not None:
            rest = self._decoder.flush()
            if rest:
                yield rest

    async def read(self) -> bytes:
        return b"".join([piece async for piece in self.chunks()])

    def _decode(self, data: bytes) -> list[bytes]:
        if self._decoder is None:  # deflate: a zlib stream, or (as some servers send it) raw deflate
            zlib_header = len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
            self._decoder = zlib.decompressobj(zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS)
        pieces = []
        try:
            piece = self._decoder.decompress(data, DECODE_PIECE_BYTES)
            while piece:
                pieces.append(piece)
                piece = self._decoder.decompress(self._decoder.unconsumed_tail, DECODE_PIECE_BYTES)
        except zlib.error as exc:
            raise UpstreamError(f"the upstream's {self._encoding} body cannot be decoded ({exc})") from None
        return pieces

    def release(self) -> None:
        """Done with the answer: its connection goes back to the pool when the answer was read to its end."""
        if self._released:
            return
        self._released = True
        self._connection.detach()
        if self.complete and self._keep_alive and self._error is None and not self._pieces:
            self._client.keep(self._origin, self._connection)
        else:
            self._connection.close()


class HttpClient:
    """Kept-alive connections per origin, and the one request the proxy makes: a POST with a body."""

    def __init__(self) -> None:
        self._idle: dict[Origin, list[_Connection]] = {}
        self._tls = ssl.create_default_context()

    async def post(
        self,
        origin: Origin,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        *,
        connect_timeout_s: float,
        read_timeout_s: float,
    ) -> UpstreamResponse:
        """Send the request and wait for the answer's head; the body is read from the returned response."""
        head = _request_head(origin, path, headers, len(body))
        for attempt in (1, 2):
            connection = self._take(origin) or await self._connect(origin, connect_timeout_s)
            answer = UpstreamResponse(self, origin, connection, read_timeout_s)
            try:
                await connection.send(head, body, answer)
                await answer.wait_head()
            except (UpstreamError, ConnectionError) as exc:
                answer.release()
                # A kept-alive connection the upstream had closed fails before any answer: try a new one once.
                if attempt == 1 and connection.reused and not answer.began:
                    continue
                if isinstance(exc, UpstreamError):
                    raise
                raise UpstreamError(f"the connection broke: {exc}") from None
            except BaseException:
                answer.release()
                raise
            return answer
        raise AssertionError("unreachable")

    def _take(self, origin: Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        while idle:
            connection = idle.pop()
            if not connection.closed:
                connection.reused = True
                return connection
        return None

    def keep(self, origin: Origin, connection: _Connection) -> None:
        idle = self._idle.setdefault(origin, [])
        if connection.closed or len(idle) >= IDLE_PER_ORIGIN:
            connection.close()
            return
        idle.append(connection)

    async def _connect(self, origin: Origin, timeout_s: float) -> _Connection:
        loop = asyncio.get_running_loop()
        tls = self._tls if origin.scheme == "https" else None
        try:
            async with asyncio.timeout(timeout_s):
                _, connection = await loop.create_connection(
                    lambda: _Connection(loop), origin.host, origin.port, ssl=tls,
                    server_hostname=origin.host if tls else None,
                )  # fmt: skip
        except TimeoutError:
            raise UpstreamError(f"no connection within {timeout_s:g} s", timed_out=True) from None
        except OSError as exc:
            raise UpstreamError(f"the connection failed: {exc.strerror or exc}") from None
        return connection

    def close(self) -> None:
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()


def _request_head(origin: Origin, path: str, headers: Mapping[str, str], length: int) -> bytes:
    lines = [f"POST {origin.base_path}{path} HTTP/1.1", f"Host: {origin.host_header}"]
    for name, value in headers.items():
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
            raise UpstreamError(f"the header {name[:40]!r} cannot be sent: it holds a line break or a colon")
        lines.append(f"{name}: {value}")
    lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape")
