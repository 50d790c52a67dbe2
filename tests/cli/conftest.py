"""Fixtures of the CLI tests: the `reef` app invoked in-process against the module's daemon (tests.support.fixtures
starts one per test module with `reef start`, in front of the fake upstream)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from typer.testing import CliRunner, Result

from reef_cli.app import app
from tests.support.cli_testing import Daemon


@pytest.fixture
def cli(daemon: Daemon) -> Callable[..., Result]:
    """Invoke the `reef` app in-process against the module's daemon (found through REEF_URL)."""
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
        environment = {"REEF_URL": daemon.url, "REEF_TOKEN": None, "COLUMNS": "200", **(env or {})}
        return runner.invoke(app, list(args), input=input, env=environment)  # type: ignore[arg-type]

    return invoke
