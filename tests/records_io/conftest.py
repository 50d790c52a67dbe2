"""Fixtures of the import and export tests: the fake upstream on a thread, and daemons started with `reef start`
in temporary directories (a second one for round trips), stopped at the end of each module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.cli_testing import Daemon, ModelThread, start_daemon
from tests.support.fake_upstream import FakeUpstream


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
