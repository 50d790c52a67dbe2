"""A reefine daemon in front of the scripted proposer model (which also answers agents, for trial runs);
restartable on the same state directory. Trial runs are off unless a test sets `harness__trial`."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from reef_daemon.app import create_app
from reef_daemon.context import DAEMON
from reef_daemon.settings import load_settings
from tests.support.adapters_testing import agent_binary
from tests.support.agent_upstream import AgentUpstream
from tests.support.reefine_testing import SCENARIO, Reefine, StartReefine


@pytest.fixture
async def start_reefine(tmp_path: Path) -> AsyncIterator[StartReefine]:
    """Start (or restart, on the same state directory and model) a reefine daemon; a scenario in manual mode."""
    started: list[tuple[TestServer, TestServer, aiohttp.ClientSession]] = []
    models = AgentUpstream()
    model = models.proposer

    async def start(**overrides: Any) -> Reefine:
        upstream = TestServer(models.app(), host="127.0.0.1")
        await upstream.start_server()
        settings = load_settings(
            overrides={
                "recipe": "reefine",
                "inference.upstream-url": str(upstream.make_url("")).rstrip("/"),
                "inference.upstream-model": "fake-proposer",
                "reef.state-dir": str(tmp_path / "state"),
                "harness.trial": "off",
                "harness.proposer-agent": "off",  # the text proposer, unless a test names an agent
                **{key.replace("__", "."): value for key, value in overrides.items()},
            },
            environ={},
        )
        server = TestServer(create_app(settings), host="127.0.0.1")
        await server.start_server()
        server.app[DAEMON].listening(server.port)  # as `reef serve` does once it listens
        session = aiohttp.ClientSession()
        started.append((server, upstream, session))
        url = str(server.make_url("")).rstrip("/")
        reefine = Reefine(url, server, model, session, overrides.get("reef__token"), models.session, models.agents)
        await reefine.call("POST", "/reef/scenarios", {"name": SCENARIO})
        return reefine

    yield start
    models.close()
    for server, upstream, session in started:
        await session.close()
        await server.close()
        await upstream.close()


@pytest.fixture
async def reefine(start_reefine: StartReefine) -> Reefine:
    return await start_reefine()


@pytest.fixture
def pi(monkeypatch: pytest.MonkeyPatch) -> Path:
    """pi, on the PATH the daemon finds agents on; the test is skipped where it is not installed."""
    found = agent_binary("pi")
    if found is None:
        pytest.skip("pi is not installed on this machine; scripts/setup installs it")
    monkeypatch.setenv("PATH", os.pathsep.join([str(found.parent), os.environ["PATH"]]))
    return found
