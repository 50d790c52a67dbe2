"""Moving the WAL's pages into the database file on a thread of its own.

SQLite's automatic checkpoint runs inside the commit that crosses the threshold, so one unlucky request waits
for the copy and its fsyncs, and a commit the event loop makes (writer.py) would stall every connection it
serves. Here a PASSIVE checkpoint (which never blocks the writer, and readers never block it) runs whenever the
WAL has grown, and a final one on close. Under a steady stream of writes a PASSIVE checkpoint never ends with
the WAL wholly copied (the writer appends while it copies), so the WAL never starts over; once it holds
RESTART_PAGES, a RESTART checkpoint copies the rest while it holds the write lock, and the next write starts
the WAL from its beginning. It never waits for a lock (`busy_timeout = 0`: a busy writer or reader makes it try
again next time); while it holds the write lock, the loop's commits go to the writer's thread, which waits.
The writer's own automatic checkpoint (WAL_BOUND_PAGES) is then only a backstop.

A WAL file grows past that bound only while a reader outside the daemon (a `sqlite3` shell, a backup) holds an
old snapshot, whose pages no checkpoint may overwrite; it would keep its size for good (a restarted WAL is
written over, never shrunk). Once it is larger than WAL_KEEP_BYTES, a TRUNCATE checkpoint is tried instead, and
it empties the file once the reader has gone.

While a checkpoint copies pages and syncs the file, the file system makes a commit wait for it (tens of ms
here, where a commit otherwise takes a fraction of one): the writer is told (`GroupCommitWriter.checkpointing`),
so that the loop hands its commits to the writer's thread meanwhile and goes on serving.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time

from reef_daemon.store.engines.engine import LOCK_WAIT_S, WAL_BOUND_PAGES, Connection, Engine
from reef_daemon.store.engines.writer import GroupCommitWriter

log = logging.getLogger("reef.store")

INTERVAL_S = 1.0
RESTART_PAGES = WAL_BOUND_PAGES // 4  # a WAL this long is copied to its end and started over
RESTART_TRIES, RESTART_PAUSE_S = 20, 0.002  # a RESTART refused (busy) is tried again at once, this many times
WAL_KEEP_BYTES = WAL_BOUND_PAGES * 4096  # a WAL file larger than this is emptied (TRUNCATE) once it can be


class Checkpointer:
    def __init__(self, engine: Engine, writer: GroupCommitWriter) -> None:
        self._engine = engine
        self._writer = writer
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.rounds = 0  # checkpoint rounds done, each after INTERVAL_S

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="reef-store-checkpoint", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop, after one last checkpoint that empties the WAL; call it after every other connection closed."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None

    def _run(self) -> None:
        conn = self._engine.connect()
        try:
            conn.execute("PRAGMA busy_timeout = 0")
            while not self._stop.wait(INTERVAL_S):
                if self._wal_bytes() > WAL_KEEP_BYTES:
                    self._start_over(conn, "TRUNCATE")
                    self.rounds += 1
                    continue
                _, pages = self._checkpoint(conn, "PASSIVE")
                if pages >= RESTART_PAGES:
                    self._start_over(conn, "RESTART")
                self.rounds += 1
            conn.execute(f"PRAGMA busy_timeout = {int(LOCK_WAIT_S * 1000)}")
            self._checkpoint(conn, "TRUNCATE")  # the writer and readers are closed by now
        finally:
            conn.close()

    def _start_over(self, conn: Connection, mode: str) -> None:
        """A RESTART or TRUNCATE checkpoint, tried again at once while a commit holds the lock it needs."""
        tries = RESTART_TRIES
        while tries and self._checkpoint(conn, mode)[0]:
            tries -= 1
            time.sleep(RESTART_PAUSE_S)

    def _wal_bytes(self) -> int:
        try:
            return os.stat(self._engine.path + "-wal").st_size
        except OSError:
            return 0

    def _checkpoint(self, conn: Connection, mode: str) -> tuple[bool, int]:
        """Run a checkpoint; returns whether a lock it needed was busy and the pages the WAL held (a failed one
        reads as busy and empty)."""
        self._writer.checkpointing = True
        try:
            row = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
        except sqlite3.Error as exc:
            log.warning("WAL checkpoint failed (will retry): %s", exc)
            return True, 0
        finally:
            self._writer.checkpointing = False
        return bool(row[0]), max(0, int(row[1]))
