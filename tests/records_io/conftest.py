"""Fixtures of the import and export tests: the fake upstream on a thread, and daemons started with `reef start`
in temporary directories (a second one for round trips), stopped at the end of each module; and a daemon in
the test's own event loop."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from aiohttp.test_utils import TestServer

from reef_daemon.app import create_app
from reef_daemon.settings import load_settings
from tests.support.cli_testing import Daemon, ModelThread, start_daemon
from tests.support.fake_upstream import FakeUpstream
from tests.support.records_io_testing import InProcessReef


@pytest.fixture(scope="session")
def upstream_url() -> Iterator[str]:
    upstream = ModelThread(FakeUpstream().app())
    yield upstream.start()
    upstream.stop()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, upstream_url: str) -> Iterator[Daemon]:
    running = start_daemon(tmp_path_factory.mktemp("reef"), upstream_url)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def other_daemon(tmp_path_factory: pytest.TempPathFactory, upstream_url: str) -> Iterator[Daemon]:
    """A second daemon with its own store, to import into."""
    running = start_daemon(tmp_path_factory.mktemp("reef-other"), upstream_url)
    yield running
    running.stop()


@pytest.fixture
async def reef(tmp_path: Path, upstream_url: str) -> AsyncIterator[InProcessReef]:
    """A daemon in this test's event loop (its store reachable), small body limit, in front of the fake model."""
    settings = load_settings(
        overrides={"inference.upstream-url": upstream_url, "reef.state-dir": str(tmp_path / "state"),
                   "reef.max-body-mb": "2"},
        environ={},
    )  # fmt: skip
    server = TestServer(create_app(settings), host="127.0.0.1")
    await server.start_server()
    client = httpx.AsyncClient(base_url=str(server.make_url("")).rstrip("/"), timeout=60)
    yield InProcessReef(server, client)
    await client.aclose()
    await server.close()
