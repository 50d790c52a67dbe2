"""Tests against the real embedded model (SmolLM2-135M-Instruct on the CPU).

The GGUF is dequantised once per run into a safetensors cache (tests.support.fixtures' `embedded_models`); each
test module runs one daemon, in a thread of this process, that loads that cache. Answers are greedy (temperature 0)
and short.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from reef_daemon.app import create_app
from reef_daemon.context import DAEMON
from reef_daemon.runtimes.embedded import EmbeddedRuntime
from reef_daemon.settings import load_settings
from tests.support.embedded_running import RunningReef


@pytest.fixture(scope="module")
def reef(embedded_models: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningReef]:
    state = tmp_path_factory.mktemp("embedded-state")
    (state / "models").symlink_to(embedded_models, target_is_directory=True)
    settings = load_settings(overrides={"reef.state-dir": str(state), "reef.port": "0"}, environ={})
    app = create_app(settings)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    runtime = app[DAEMON].runtime
    assert isinstance(runtime, EmbeddedRuntime)
    thread = threading.Thread(target=loop.run_forever, name="reef-test-daemon", daemon=True)
    thread.start()
    try:
        yield RunningReef(f"http://127.0.0.1:{port}", runtime, loop)
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()
