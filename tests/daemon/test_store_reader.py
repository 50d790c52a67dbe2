"""Closing the store while a read runs: the read finishes on a live connection, later reads are refused."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from reef_daemon.errors import StoreError
from reef_daemon.store.engines.engine import Connection
from reef_daemon.store.engines.opening import open_engine
from reef_daemon.store.engines.reader import Reader
from reef_daemon.store.engines.schema import migrate


def test_close_waits_for_a_running_read_and_later_reads_are_refused(tmp_path: Path, store_url: str | None) -> None:
    engine = open_engine(store_url, tmp_path)
    conn = engine.connect()
    migrate(conn, engine)
    conn.close()
    reader = Reader(engine)
    started, release = threading.Event(), threading.Event()
    answers: list[int] = []

    def slow_count(conn: Connection) -> int:
        started.set()
        release.wait(10)
        return int(conn.execute("SELECT count(*) FROM records").fetchone()[0])

    reading = threading.Thread(target=lambda: answers.append(reader.run_blocking(slow_count)))
    reading.start()
    assert started.wait(10)
    closing = threading.Thread(target=reader.close)
    closing.start()
    closing.join(0.2)
    assert closing.is_alive()  # it waits for the read rather than closing its connection under it
    release.set()
    reading.join(10)
    closing.join(10)
    assert answers == [0] and not closing.is_alive()
    with pytest.raises(StoreError, match="closed"):
        reader.run_blocking(slow_count)
    reader.close()  # closing twice is harmless
