"""Real daemons for the TUI tests, started with `reef start` in a temporary directory: the record-only recipe
before the fake upstream (tests.support.fixtures' `daemon`), and the reefine recipe before the scripted proposer
model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.fake_proposer_model import FakeProposerModel
from tests.support.tui_testing import Daemon, ModelThread, start_daemon


@pytest.fixture(scope="module")
def proposer() -> Iterator[tuple[FakeProposerModel, str]]:
    model = FakeProposerModel()
    server = ModelThread(model.app())
    yield model, server.start()
    server.stop()


@pytest.fixture(scope="module")
def reefine_daemon(
    tmp_path_factory: pytest.TempPathFactory, proposer: tuple[FakeProposerModel, str]
) -> Iterator[Daemon]:
    """A reefine daemon before the scripted proposer model, with a scenario `harness` in manual mode."""
    _model, url = proposer
    running = start_daemon(
        tmp_path_factory.mktemp("reefine"), url, "--recipe", "reefine", "--inference.upstream-model", "fake-proposer",
        "--harness.trial", "off", "--harness.proposer-agent", "off",  # snapshots must not depend on the agents here
    )  # fmt: skip
    running.post("/reef/scenarios", {"name": "harness"})
    yield running
    running.stop()
