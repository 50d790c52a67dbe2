"""Fixtures of the adapter tests: a home outside /tmp, the fake model, and a running reefine daemon."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.adapters_testing import Reefine, start_reefine, stop_reefine
from tests.support.agent_upstream import AgentUpstream


@pytest.fixture
def home() -> Iterator[Path]:
    """A home directory outside /tmp and outside any git work tree."""
    base = Path("/var/tmp") if Path("/var/tmp").is_dir() else Path.home()
    path = Path(tempfile.mkdtemp(prefix="reef-adapters-", dir=base))
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
