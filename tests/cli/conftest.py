"""Fixtures of the CLI tests: the fake upstream, one daemon per test module (started with `reef start` in a
temporary directory and stopped at the end), and the `reef` app invoked in-process against it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from typer.testing import CliRunner, Result

from reef_cli.app import app
from tests.support.cli_testing import Daemon, ModelThread, start_daemon
from tests.support.fake_upstream import FakeUpstream


@pytest.fixture(scope="session")
def upstream_url() -> Iterator[str]:
    upstream = ModelThread(FakeUpstream().app())
    yield upstream.start()
    upstream.stop()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, upstream_url: str) -> Iterator[Daemon]:
    """One daemon per test module, stopped at the end of it."""
    running = start_daemon(tmp_path_factory.mktemp("reef"), upstream_url)
    yield running
    running.stop()


@pytest.fixture
def cli(daemon: Daemon) -> Callable[..., Result]:
    """Invoke the `reef` app in-process against the module's daemon (found through REEF_URL)."""
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
        environment = {"REEF_URL": daemon.url, "REEF_TOKEN": None, "COLUMNS": "200", **(env or {})}
        return runner.invoke(app, list(args), input=input, env=environment)  # type: ignore[arg-type]

    return invoke
