"""A real reef app in front of the fake upstream, both on loopback ports, for in-process daemon tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from reef_daemon.app import create_app
from reef_daemon.settings import load_settings
from tests.support.fake_upstream import FakeUpstream
from tests.support.reef_testing import Reef, StartReef


@pytest.fixture
async def start_reef(tmp_path: Path) -> AsyncIterator[StartReef]:
    """Start the fake upstream and a reef app in front of it; settings overrides as keyword arguments."""
    started: list[tuple[TestServer, TestServer, aiohttp.ClientSession]] = []

    async def start(
        upstream: FakeUpstream | None = None, environ: dict[str, str] | None = None, **overrides: Any
    ) -> Reef:
        upstream = upstream or FakeUpstream()
        upstream_server = TestServer(upstream.app(), host="127.0.0.1")
        await upstream_server.start_server()
        settings = load_settings(
            overrides={
                "inference.upstream-url": str(upstream_server.make_url("")).rstrip("/"),
                "reef.state-dir": str(tmp_path / "state"),
                **{key.replace("__", "."): value for key, value in overrides.items()},
            },
            environ=environ or {},
        )
        server = TestServer(create_app(settings), host="127.0.0.1")
        await server.start_server()
        session = aiohttp.ClientSession()
        started.append((server, upstream_server, session))
        return Reef(str(server.make_url("")).rstrip("/"), server, upstream, session)

    yield start
    for server, upstream_server, session in started:
        await session.close()
        await server.close()
        await upstream_server.close()


@pytest.fixture
async def reef(start_reef: StartReef) -> Reef:
    return await start_reef()
