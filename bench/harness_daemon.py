"""What the harness benchmarks (`agent_proposer.py`, `evaluation.py`) share: pi as set-up installs it, the tests'
fake models on a loopback port, a reefine daemon served in-process with the benchmark's scenario, and a change
request filed and waited on until it settles."""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from reef_contract import SCENARIO_HEADER
from reef_daemon.app import create_app
from reef_daemon.context import DAEMON
from reef_daemon.settings import load_settings
from tests.support.adapters_testing import agent_binary
from tests.support.agent_upstream import AgentUpstream

SCENARIO = "bench"
HEADERS = {SCENARIO_HEADER: SCENARIO}


def installed_pi() -> Path | None:
    """Where scripts/setup installed pi; None, said on stderr, when it is not installed."""
    pi = agent_binary("pi")
    if pi is None:
        print("pi is not installed; scripts/setup installs it", file=sys.stderr)
    return pi


@asynccontextmanager
async def fake_models() -> AsyncIterator[tuple[AgentUpstream, dict[str, str]]]:
    """The tests' fake models served on a loopback port: the fakes (to script them) and the daemon settings that
    make them its upstream."""
    models = AgentUpstream()
    upstream = TestServer(models.app(), host="127.0.0.1")
    await upstream.start_server()
    try:
        url = str(upstream.make_url("")).rstrip("/")
        yield models, {"inference.upstream-url": url, "inference.upstream-model": "fake-proposer"}
    finally:
        await upstream.close()
        models.close()


@asynccontextmanager
async def reefine_daemon(state: Path, overrides: Mapping[str, str]) -> AsyncIterator[tuple[aiohttp.ClientSession, str]]:
    """A daemon running reefine in-process on the state folder `state`, with SCENARIO created: a client session
    and the daemon's base URL."""
    settings = load_settings(overrides={"recipe": "reefine", "reef.state-dir": str(state), **overrides}, environ={})
    server = TestServer(create_app(settings), host="127.0.0.1")
    await server.start_server()
    try:
        assert server.port is not None
        server.app[DAEMON].listening(server.port)
        base = str(server.make_url("")).rstrip("/")
        async with aiohttp.ClientSession() as session:
            await session.post(f"{base}/reef/scenarios", json={"name": SCENARIO})
            yield session, base
    finally:
        await server.close()


async def settle(session: aiohttp.ClientSession, base: str, text: str, limit_s: float = math.inf) -> dict[str, Any]:
    """File the change request `text` for SCENARIO and poll it until it settles, or until `limit_s` have passed:
    its last progress."""
    started = time.monotonic()
    async with session.post(f"{base}/reef/requests", json={"text": text}, headers=HEADERS) as filed:
        request_id = (await filed.json())["agent_record_id"]
    while True:
        async with session.get(f"{base}/reef/requests/{request_id}", headers=HEADERS) as answered:
            progress: dict[str, Any] = await answered.json()
        if progress["state"] == "settled" or time.monotonic() - started >= limit_s:
            return progress
        await asyncio.sleep(0.5)
