"""After a clean shutdown every record is in the database file itself: the write-ahead log was checkpointed."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from reef_daemon.store.engines import checkpointer
from reef_daemon.store.engines.opening import open_engine
from reef_daemon.store.engines.writer import GroupCommitWriter
from tests.daemon.test_store_writer import insert, on_thread
from tests.support.reef_testing import CHAT, StartReef
from tests.support.waiting import eventually


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


RUN_WRITES = 50  # writes back to back between two of the Checkpointer's rounds


async def a_whole_round(running: checkpointer.Checkpointer) -> None:
    """Wait until the Checkpointer has begun and ended a whole round since now."""
    done = running.rounds
    await eventually(lambda: running.rounds, 60, "a checkpoint round", satisfied=lambda rounds: rounds >= done + 2)


async def wal_pages_after_steady_writes(directory: Path, writes: int, *, copier: bool) -> int:
    """How many pages the WAL's file reached while a writer committed `writes` records on the loop, back to back in
    runs of RUN_WRITES, with the Checkpointer running beside it or with none (then the WAL holds every page written).
    After each run the Checkpointer is given a round of its own, however loaded the machine is (it runs on a
    thread), so what is measured is what its rounds do, not how often the machine lets its thread in."""
    engine = open_engine(None, directory)
    writer = GroupCommitWriter(engine, lambda _events: None)
    writer.start(asyncio.get_running_loop())
    running = checkpointer.Checkpointer(engine, writer) if copier else None
    if running is not None:
        running.start()
    try:
        for n in range(writes):
            await writer.enqueue(insert(f"r{n}"), brief=True)
            if running is not None and (n + 1) % RUN_WRITES == 0:
                await a_whole_round(running)
        return Path(engine.path + "-wal").stat().st_size // 4096  # before closing: the last close removes it
    finally:
        writer.stop()
        if running is not None:
            running.stop()


async def test_the_wal_an_outside_reader_made_grow_is_emptied_once_the_reader_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a `sqlite3` shell holds an old snapshot no checkpoint may copy past it, so the WAL grows; a restarted
    WAL would keep that size for good. Once the reader has gone, the file is emptied."""
    monkeypatch.setattr(checkpointer, "INTERVAL_S", 0.01)
    monkeypatch.setattr(checkpointer, "WAL_KEEP_BYTES", 256 * 1024)
    engine = open_engine(None, tmp_path)
    writer = GroupCommitWriter(engine, lambda _events: None)
    writer.start(asyncio.get_running_loop())
    running = checkpointer.Checkpointer(engine, writer)
    running.start()
    wal = Path(engine.path + "-wal")
    try:
        outside = sqlite3.connect(engine.path, isolation_level=None)
        outside.execute("BEGIN")
        assert outside.execute("SELECT count(*) FROM records").fetchone() == (0,)  # its snapshot is held from here
        for n in range(300):
            await writer.enqueue(insert(f"r{n}"), brief=True)
        assert wal.stat().st_size > 256 * 1024
        outside.execute("COMMIT")
        outside.close()
        await eventually(lambda: wal.stat().st_size, 60, "the WAL emptied", satisfied=lambda size: size == 0)
    finally:
        writer.stop()
        running.stop()


async def test_under_steady_writes_the_wal_starts_over_instead_of_growing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PASSIVE checkpoint racing a writer that never pauses seldom ends with the WAL wholly copied, so the WAL
    would grow until a commit checkpointed it itself (on the event loop, for a brief write). The Checkpointer
    copies the rest while it holds the write lock, and the WAL starts over: its file stays a fraction of every
    page the writes made."""
    monkeypatch.setattr(checkpointer, "INTERVAL_S", 0.01)
    monkeypatch.setattr(checkpointer, "RESTART_PAGES", 16)
    written = await wal_pages_after_steady_writes(tmp_path / "unchecked", 600, copier=False)
    restarting = await wal_pages_after_steady_writes(tmp_path / "restarting", 600, copier=True)
    assert restarting <= written // 2


async def test_the_loop_leaves_its_commits_to_the_writer_s_thread_while_a_checkpoint_copies(tmp_path: Path) -> None:
    """While the WAL is copied into the file, a commit waits on the file system; the loop, which serves every
    connection, hands its brief writes to the thread meanwhile, and commits them itself again after."""
    writer = GroupCommitWriter(open_engine(None, tmp_path), lambda _events: None)
    writer.start(asyncio.get_running_loop())
    threads: dict[str, str] = {}
    try:
        writer.checkpointing = True
        assert await writer.enqueue(on_thread("during", threads), brief=True) == 1
        writer.checkpointing = False
        assert await writer.enqueue(on_thread("after", threads), brief=True) == 2
    finally:
        writer.stop()
    assert threads == {"during": "reef-store-writer", "after": threading.current_thread().name}
