"""The schema's migrations, on both engines: applied at start, and a database newer than this reef is refused with
a message that says so; an unreachable PostgreSQL is named, not a traceback."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from reef_daemon.store import Store, StoreUnavailable
from reef_daemon.store.engines.opening import open_engine
from reef_daemon.store.engines.schema import MIGRATIONS, migrate

SCALE = {"min": 0.0, "max": 1.0}


async def test_a_database_newer_than_this_reef_is_refused(tmp_path: Path, store_url: str | None) -> None:
    engine = open_engine(store_url, tmp_path)
    conn = engine.connect()
    assert migrate(conn, engine) == len(MIGRATIONS)
    assert migrate(conn, engine) == len(MIGRATIONS)  # applied once: again is nothing
    conn.execute("BEGIN")
    engine.set_schema_version(conn, len(MIGRATIONS) + 1)
    conn.execute("COMMIT")
    conn.close()
    store = Store(tmp_path, lambda _events: None, score_scale=SCALE, url=store_url)  # type: ignore[arg-type]
    with pytest.raises(StoreUnavailable, match=f"schema version {len(MIGRATIONS) + 1}, newer than this reef"):
        store.open(asyncio.get_running_loop())


async def test_an_unreachable_database_is_named(tmp_path: Path) -> None:
    store = Store(tmp_path, lambda _events: None, score_scale=SCALE, url="postgresql://reef:secret@127.0.0.1:1/reef")  # type: ignore[arg-type]
    with pytest.raises(StoreUnavailable, match=re.escape("cannot reach postgresql://reef@127.0.0.1:1/reef")) as refused:
        store.open(asyncio.get_running_loop())
    assert "secret" not in str(refused.value)
