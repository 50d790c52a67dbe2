"""A reefine daemon in front of the scripted proposer model (which also answers agents, for trial runs);
restartable on the same state directory. Trial runs are off unless a test sets `harness__trial`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from reef_daemon.context import DAEMON
from reef_daemon.settings import load_settings
from tests.support.agent_upstream import AgentUpstream
from tests.support.app_servers import AppServers, url_of
from tests.support.fixtures import FindAgent
from tests.support.reefine_testing import SCENARIO, Reefine, StartReefine


@pytest.fixture
def start_reefine(tmp_path: Path, app_servers: AppServers) -> Iterator[StartReefine]:
    """Start (or restart, on the same state directory and model) a reefine daemon; a scenario in manual mode."""
    models = AgentUpstream()
    model = models.proposer

    async def start(**overrides: Any) -> Reefine:
        upstream = await app_servers.serve(models.app())
        settings = load_settings(
            overrides={
                "recipe": "reefine",
                "inference.upstream-url": url_of(upstream),
                "inference.upstream-model": "fake-proposer",
                "reef.state-dir": str(tmp_path / "state"),
                "harness.trial": "off",
                "harness.proposer-agent": "off",  # the text proposer, unless a test names an agent
                **{key.replace("__", "."): value for key, value in overrides.items()},
            },
            environ={},
        )
        server = await app_servers.reef(settings)
        server.app[DAEMON].listening(server.port)  # as `reef serve` does once it listens
        session = aiohttp.ClientSession()
        app_servers.close_later(session.close)
        reefine = Reefine(url_of(server), server, model, session, overrides.get("reef__token"), models.session,
                          models.agents)  # fmt: skip
        await reefine.call("POST", "/reef/scenarios", {"name": SCENARIO})
        return reefine

    yield start
    models.close()


@pytest.fixture
async def reefine(start_reefine: StartReefine) -> Reefine:
    return await start_reefine()


@pytest.fixture
def pi(agent_cli: FindAgent, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pi, on the PATH the daemon finds agents on; the test is skipped where it is not installed."""
    found = agent_cli("pi")
    monkeypatch.setenv("PATH", os.pathsep.join([str(found.parent), os.environ["PATH"]]))
    return found
