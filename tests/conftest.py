"""Fixtures shared by every test folder."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def embedded_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A `models` folder holding the embedded model's safetensors cache, written once per test session.

    Link it into a state directory as `<state>/models` and the daemon loads the cache instead of the GGUF.
    """
    from reef_daemon.runtimes.embedded.loading import load_model, resolve_source

    state = tmp_path_factory.mktemp("embedded-cache")
    (state / "models").mkdir()  # this session's own cache, not the user's
    load_model(resolve_source(None), state)
    return state / "models"
