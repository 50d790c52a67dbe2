"""A real daemon on the embedded model with a weight recipe, in this test's event loop."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp.test_utils import TestServer

from reef_daemon.app import create_app
from reef_daemon.recipe_host import load_serving_settings
from tests.support.weight_testing import StartWeightReef, WeightReef


@pytest.fixture
async def start_weight_reef(embedded_models: Path, tmp_path: Path) -> AsyncIterator[StartWeightReef]:
    """Start (or restart, on the same state directory) a daemon serving the embedded model with a weight recipe."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "models").symlink_to(embedded_models, target_is_directory=True)
    running: list[tuple[TestServer, httpx.AsyncClient]] = []

    async def start(**overrides: str) -> WeightReef:
        settings = load_serving_settings(
            config_file=None,
            overrides={
                "reef.state-dir": str(state),
                "recipe": "sao",
                "training.critic-warmup-steps": "0",
                "training.checkpoint-every": "1",
                "training.learning-rate": "1e-4",
                **{key.replace("__", ".").replace("_", "-"): value for key, value in overrides.items()},
            },
            environ={},
        )
        server = TestServer(create_app(settings), host="127.0.0.1")
        await server.start_server()
        client = httpx.AsyncClient(base_url=str(server.make_url("")).rstrip("/"), timeout=120)
        running.append((server, client))
        return WeightReef(server, client)

    yield start
    for server, client in running:
        await client.aclose()
        await server.close()
