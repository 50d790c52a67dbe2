"""The fixtures every test folder shares, loaded as a plugin by tests/conftest.py.

The embedded model's safetensors cache (converted once per run, whatever the number of xdist workers), a fake model
on a thread of its own, a daemon `reef start` ran for each test module, reef apps served in the test's own event
loop, and the agent CLIs that set-up installs. tests/conftest.py marks each test with the tiers of the fixtures it
uses (`model`, `agent`, `process`, `postgres`), so the marks follow the fixtures and none is forgotten.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from filelock import FileLock

from tests.support.adapters_testing import agent_binary
from tests.support.app_servers import AppServers
from tests.support.cli_testing import Daemon, ModelThread
from tests.support.fake_upstream import FakeUpstream
from tests.support.postgres import PostgresServer, running_server
from tests.support.tui_testing import start_daemon

FindAgent = Callable[[str], Path]


def run_wide_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder all xdist workers of this run share (each worker's base temp is a child of it); without xdist, the
    run's own base temp."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def embedded_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A `models` folder holding the embedded model's safetensors cache, converted from the GGUF once per test run
    (the first worker to get here converts it; the others wait and reuse it).

    Link it into a state directory as `<state>/models` and the daemon loads the cache instead of the GGUF.
    """
    from reef_daemon.runtimes.embedded.loading import load_model, resolve_source

    shared = run_wide_folder(tmp_path_factory)
    state = shared / "embedded-cache"
    converted = state / "converted"
    with FileLock(str(shared / "embedded-cache.lock")):
        if not converted.exists():
            (state / "models").mkdir(parents=True, exist_ok=True)  # this run's own cache, not the user's
            loaded = load_model(resolve_source(None), state)
            assert loaded.cold and (loaded.weights_dir / "model.safetensors").is_file()
            converted.touch()
    return state / "models"


@pytest.fixture(scope="session")
def upstream_url() -> Iterator[str]:
    """The fake upstream model (tests.support.fake_upstream), on a thread of its own, for the whole run."""
    upstream = ModelThread(FakeUpstream().app())
    yield upstream.start()
    upstream.stop()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, upstream_url: str) -> Iterator[Daemon]:
    """A record-only daemon `reef start` ran before the fake upstream (times in UTC), one per test module."""
    running = start_daemon(tmp_path_factory.mktemp("reef"), upstream_url)
    yield running
    running.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL server (tests.support.postgres) for this worker's whole run, stopped at its end."""
    with running_server() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A fresh, empty database on the test server, for this test alone."""
    return postgres_server.database()


@pytest.fixture(params=[pytest.param("sqlite"), pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest) -> str | None:
    """The store's engine, once each: None (the SQLite file in the state directory), then a fresh PostgreSQL
    database (the `postgres` tier: the test starts the throwaway server)."""
    if request.param == "sqlite":
        return None
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
async def app_servers() -> AsyncIterator[AppServers]:
    """reef apps and fake models served in this test's event loop; all closed when the test ends."""
    servers = AppServers()
    yield servers
    await servers.close()


@pytest.fixture
def agent_cli() -> FindAgent:
    """Find an agent CLI that set-up installs (pi, codex, claude, opencode, dsh); the test is skipped where it is
    not installed. A test that uses this fixture runs a real agent, so it is marked `agent`."""

    def find(name: str) -> Path:
        found = agent_binary(name)
        if found is None:
            pytest.skip(f"{name} is not installed on this machine; scripts/setup installs it")
        return found

    return find


@pytest.fixture
def scripted_pi(tmp_path: Path) -> Path:
    """An executable that stands in for `pi -p` (tests.support.scripted_pi): reads the harness, asks the model
    once through the binding, prints the answer. For the gate's logic; a test about a real agent uses `agent_cli`."""
    program = tmp_path / "scripted-agent" / "pi"
    program.parent.mkdir()
    source = Path(__file__).with_name("scripted_pi.py").read_text(encoding="utf-8")
    program.write_text(f"#!{sys.executable}\n{source}", encoding="utf-8")
    program.chmod(0o755)
    return program
