"""After a clean shutdown every record is in the database file itself: the write-ahead log was checkpointed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.support.reef_testing import CHAT, StartReef


async def test_clean_shutdown_leaves_no_write_ahead_log(start_reef: StartReef) -> None:
    reef = await start_reef()
    for _ in range(20):
        assert (await reef.post("/v1/chat/completions", CHAT)).status == 200
    database = Path(reef.daemon.store.engine.path)
    await reef.server.close()
    wal = database.with_name(database.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        assert db.execute("SELECT count(*) FROM records").fetchone() == (20,)
