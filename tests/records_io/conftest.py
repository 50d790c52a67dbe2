"""Fixtures of the import and export tests: a second daemon started with `reef start` (with its own store, for
round trips; the first is tests.support.fixtures' `daemon`), and a daemon in the test's own event loop."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from reef_daemon.settings import load_settings
from tests.support.app_servers import AppServers, url_of
from tests.support.cli_testing import Daemon, start_daemon
from tests.support.records_io_testing import InProcessReef


@pytest.fixture(scope="module")
def other_daemon(tmp_path_factory: pytest.TempPathFactory, upstream_url: str) -> Iterator[Daemon]:
    """A second daemon with its own store, to import into."""
    running = start_daemon(tmp_path_factory.mktemp("reef-other"), upstream_url)
    yield running
    running.stop()


@pytest.fixture
async def reef(tmp_path: Path, upstream_url: str, app_servers: AppServers) -> AsyncIterator[InProcessReef]:
    """A daemon in this test's event loop (its store reachable), small body limit, in front of the fake model."""
    settings = load_settings(
        overrides={"inference.upstream-url": upstream_url, "reef.state-dir": str(tmp_path / "state"),
                   "reef.max-body-mb": "2"},
        environ={},
    )  # fmt: skip
    server = await app_servers.reef(settings)
    client = httpx.AsyncClient(base_url=url_of(server), timeout=60)
    yield InProcessReef(server, client)
    await client.aclose()
