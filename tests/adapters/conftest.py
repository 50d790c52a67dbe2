"""Fixtures of the adapter tests: a home outside /tmp, the fake model, and a running reefine daemon."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.adapters_testing import Reefine, start_reefine, stop_reefine
from tests.support.agent_upstream import AgentUpstream


def _new_home() -> Path:
    """A home directory outside /tmp and outside any git work tree."""
    base = Path("/var/tmp") if Path("/var/tmp").is_dir() else Path.home()
    return Path(tempfile.mkdtemp(prefix="reef-adapters-", dir=base))


@pytest.fixture
def home() -> Iterator[Path]:
    path = _new_home()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def upstream() -> Iterator[AgentUpstream]:
    started = AgentUpstream()
    started.start()
    yield started
    started.stop()


@pytest.fixture
def reefine(tmp_path: Path, upstream: AgentUpstream, home: Path) -> Iterator[Reefine]:
    started = start_reefine(tmp_path, upstream, home)
    yield started
    stop_reefine(tmp_path, started)


@pytest.fixture(scope="module")
def shared_reefine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reefine]:
    """One reefine daemon for a module whose tests change nothing of it but what each files for itself: each test
    gets it at a home of its own (`at_home`)."""
    upstream = AgentUpstream()
    upstream.start()
    folder, home = tmp_path_factory.mktemp("reefine"), _new_home()
    started = start_reefine(folder, upstream, home)
    yield started
    stop_reefine(folder, started)
    upstream.stop()
    shutil.rmtree(home, ignore_errors=True)
