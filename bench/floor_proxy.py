"""The yardstick: the floor of a recording proxy in aiohttp ("floor-b" in shared/reference/perf-anchors.md).

Per request it does the least a recording proxy must: read the body, forward it on one shared keep-alive
ClientSession, drop hop-by-hop headers, relay the answer, and write one row per exchange to SQLite (WAL,
synchronous=NORMAL) through one writer thread that commits whatever is queued as one transaction (group
commit). A non-stream reply is sent only after its row is committed; a stream is relayed chunk by chunk as
bytes arrive and its end (EOF) is written only after the commit. Without `--record` it is floor-a, the bare
pass-through. reef is measured as a ratio to this, in the same interleaved run.

    python bench/floor_proxy.py --port 18002 --upstream http://127.0.0.1:18000 --record /tmp/floor.db
"""

from __future__ import annotations

import argparse
import asyncio
import json
import queue
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Mapping
from typing import NamedTuple

import aiohttp
import uvloop
from aiohttp import web

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "host",
    }
)
SCHEMA = """
CREATE TABLE IF NOT EXISTS exchanges (
    id INTEGER PRIMARY KEY,
    method TEXT, path TEXT, status INTEGER,
    request_headers TEXT, response_headers TEXT,
    request BLOB, response BLOB,
    stream INTEGER, ttfb_ms REAL, duration_ms REAL
)
"""


class Row(NamedTuple):
    """One exchange, in the column order of `exchanges` (so executemany takes it as is)."""

    method: str
    path: str
    status: int
    request_headers: str
    response_headers: str
    request: bytes
    response: bytes
    stream: int
    ttfb_ms: float | None
    duration_ms: float


class Writer:
    """One thread owns the connection; each batch of queued rows is one transaction."""

    def __init__(self, path: str, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: queue.SimpleQueue[tuple[Row, asyncio.Future[None]] | None] = queue.SimpleQueue()
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(SCHEMA)
        self._conn = conn
        self.batches = 0
        self.rows = 0
        self._thread = threading.Thread(target=self._run, name="floor-writer", daemon=True)
        self._thread.start()

    async def append(self, row: Row) -> None:
        future: asyncio.Future[None] = self._loop.create_future()
        self._queue.put((row, future))
        await future

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)
        self._conn.close()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            batch: list[tuple[Row, asyncio.Future[None]]] = []
            stopping = False
            while True:
                if item is None:
                    stopping = True
                else:
                    batch.append(item)
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                self._commit(batch)
            if stopping:
                return

    def _commit(self, batch: list[tuple[Row, asyncio.Future[None]]]) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO exchanges (method, path, status, request_headers, response_headers, request,"
            " response, stream, ttfb_ms, duration_ms) VALUES (?,?,?,?,?,?,?,?,?,?)",
            [row for row, _ in batch],
        )
        conn.execute("COMMIT")
        self.batches += 1
        self.rows += len(batch)
        futures = [future for _, future in batch]
        self._loop.call_soon_threadsafe(_resolve, futures)


def _resolve(futures: list[asyncio.Future[None]]) -> None:
    for future in futures:
        if not future.done():
            future.set_result(None)


SESSION = web.AppKey("session", aiohttp.ClientSession)
WRITER = web.AppKey("writer", Writer)
UPSTREAM = web.AppKey("upstream", str)


def _forwardable(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP}


async def proxy(request: web.Request) -> web.StreamResponse:
    started = time.perf_counter()
    body = await request.read()
    request_headers = _forwardable(request.headers)
    session = request.app[SESSION]
    writer = request.app.get(WRITER)
    async with session.request(
        request.method, request.app[UPSTREAM] + request.path_qs, data=body, headers=request_headers
    ) as upstream:
        response_headers = _forwardable(upstream.headers)
        is_stream = upstream.headers.get("content-type", "").startswith("text/event-stream")
        if not is_stream:
            answer = await upstream.read()
            if writer is not None:
                row = Row(
                    request.method, request.path, upstream.status, json.dumps(request_headers),
                    json.dumps(response_headers), body, answer, 0, None,
                    (time.perf_counter() - started) * 1000,
                )  # fmt: skip
                await writer.append(row)
            return web.Response(status=upstream.status, body=answer, headers=response_headers)

        response = web.StreamResponse(status=upstream.status, headers=response_headers)
        await response.prepare(request)
        received: list[bytes] = []
        ttfb_ms: float | None = None
        async for data in upstream.content.iter_any():
            if ttfb_ms is None:
                ttfb_ms = (time.perf_counter() - started) * 1000
            received.append(data)
            await response.write(data)
        if writer is not None:
            row = Row(
                request.method, request.path, upstream.status, json.dumps(request_headers),
                json.dumps(response_headers), body, b"".join(received), 1, ttfb_ms,
                (time.perf_counter() - started) * 1000,
            )  # fmt: skip
            await writer.append(row)
        await response.write_eof()
        return response


async def status(request: web.Request) -> web.Response:
    writer = request.app.get(WRITER)
    counts = {"batches": writer.batches, "rows": writer.rows} if writer is not None else {}
    return web.json_response({"store": counts})


def build_app(upstream: str, record: str | None) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[UPSTREAM] = upstream.rstrip("/")

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        connector = aiohttp.TCPConnector(limit=0)
        app[SESSION] = aiohttp.ClientSession(
            connector=connector, auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None)
        )
        if record is not None:
            app[WRITER] = Writer(record, asyncio.get_running_loop())
        yield
        await app[SESSION].close()
        if record is not None:
            app[WRITER].stop()

    app.cleanup_ctx.append(lifecycle)
    app.router.add_get("/floor/status", status)
    app.router.add_route("*", "/{tail:.*}", proxy)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="e.g. http://127.0.0.1:18000")
    parser.add_argument("--record", metavar="DB", help="record every exchange to this SQLite file (floor-b)")
    args = parser.parse_args()
    web.run_app(
        build_app(args.upstream, args.record),
        host="127.0.0.1",
        port=args.port,
        access_log=None,
        print=lambda *_: print(f"floor proxy on http://127.0.0.1:{args.port}", flush=True),
        backlog=1024,
        loop=uvloop.new_event_loop(),
    )


if __name__ == "__main__":
    main()
