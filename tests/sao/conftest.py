"""A real daemon on the embedded model with a weight recipe, in this test's event loop."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from reef_daemon.recipe_host import load_serving_settings
from tests.support.app_servers import AppServers, url_of
from tests.support.weight_testing import StartWeightReef, WeightReef


@pytest.fixture
def start_weight_reef(embedded_models: Path, tmp_path: Path, app_servers: AppServers) -> StartWeightReef:
    """Start (or restart, on the same state directory) a daemon serving the embedded model with a weight recipe."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "models").symlink_to(embedded_models, target_is_directory=True)

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
        server = await app_servers.reef(settings)
        client = httpx.AsyncClient(base_url=url_of(server), timeout=120)
        app_servers.close_later(client.aclose)
        return WeightReef(server, client)

    return start
