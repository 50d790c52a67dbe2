"""A real reef app in front of the fake upstream, both on loopback ports, for in-process daemon tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from reef_daemon.settings import load_settings
from reef_daemon.store.engines.engine import Connection, Engine
from reef_daemon.store.engines.opening import open_engine
from reef_daemon.store.engines.schema import migrate
from tests.support.app_servers import AppServers, url_of
from tests.support.fake_upstream import FakeUpstream
from tests.support.reef_testing import Reef, StartReef


@pytest.fixture
def start_reef(tmp_path: Path, app_servers: AppServers, request: pytest.FixtureRequest) -> StartReef:
    """Start the fake upstream and a reef app in front of it; settings overrides as keyword arguments. With
    `--store postgres` the app's store is a PostgreSQL database of this test's own (the same for each start), but
    for a test marked `sqlite_file`, which reads the SQLite file itself."""
    store: dict[str, str] = {}
    if request.config.getoption("store") == "postgres" and request.node.get_closest_marker("sqlite_file") is None:
        store["store.url"] = str(request.getfixturevalue("postgres_url"))

    async def start(
        upstream: FakeUpstream | None = None, environ: dict[str, str] | None = None, **overrides: Any
    ) -> Reef:
        upstream = upstream or FakeUpstream()
        upstream_server = await app_servers.serve(upstream.app())
        settings = load_settings(
            overrides={
                "inference.upstream-url": url_of(upstream_server),
                "reef.state-dir": str(tmp_path / "state"),
                **store,
                **{key.replace("__", "."): value for key, value in overrides.items()},
            },
            environ=environ or {},
        )
        server = await app_servers.reef(settings)
        session = aiohttp.ClientSession()
        app_servers.close_later(session.close)
        return Reef(url_of(server), server, upstream, session)

    return start


@pytest.fixture
async def reef(start_reef: StartReef) -> Reef:
    return await start_reef()


@pytest.fixture
def store_engine(tmp_path: Path, store_url: str | None) -> Engine:
    """The store's engine, SQLite and (where the tests run it) PostgreSQL."""
    return open_engine(store_url, tmp_path)


@pytest.fixture
def migrated_conn(store_engine: Engine) -> Iterator[Connection]:
    """A connection to an empty store of the current schema, on either engine."""
    conn = store_engine.connect()
    migrate(conn, store_engine)
    yield conn
    conn.close()


@pytest.fixture
def migrated_sqlite_conn(tmp_path: Path) -> Iterator[Connection]:
    """The same on SQLite alone, for tests that read its query plans."""
    engine = open_engine(None, tmp_path)
    conn = engine.connect()
    migrate(conn, engine)
    yield conn
    conn.close()
