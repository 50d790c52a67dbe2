"""reef apps and fake models served in the test's own event loop, on loopback ports, closed together at the end.

In-process daemons let a test reach the daemon's insides (its store, runtime, recipe worker) while it serves real
HTTP; the `app_servers` fixture (tests.support.fixtures) hands one of these to a test and closes it after.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from reef_daemon.app import create_app
from reef_daemon.settings import Settings


class AppServers:
    """Serves aiohttp apps on free loopback ports and closes them (and whatever else was handed over) last in,
    first out."""

    def __init__(self) -> None:
        self._closers: list[Callable[[], Awaitable[Any]]] = []

    async def serve(self, app: web.Application) -> TestServer:
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        self._closers.append(server.close)
        return server

    async def reef(self, settings: Settings) -> TestServer:
        """A reef daemon with these settings."""
        return await self.serve(create_app(settings))

    def close_later(self, closer: Callable[[], Awaitable[Any]]) -> None:
        """Close something else (a client session) with the servers, before the servers started ahead of it."""
        self._closers.append(closer)

    async def close(self) -> None:
        while self._closers:
            await self._closers.pop()()


def url_of(server: TestServer) -> str:
    return str(server.make_url("")).rstrip("/")
