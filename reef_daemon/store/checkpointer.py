"""Moving the WAL's pages into the database file on a thread of its own.

SQLite's automatic checkpoint runs inside the commit that crosses the threshold, so one unlucky request waits
for the copy and its fsync. Here the writer never checkpoints; this thread runs a PASSIVE checkpoint (which
never blocks the writer, and readers never block it) whenever the WAL has grown, and a final one on close.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

from reef_daemon.store.engine import Connection, Engine

log = logging.getLogger("reef.store")

INTERVAL_S = 1.0


class Checkpointer:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

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
            while not self._stop.wait(INTERVAL_S):
                self._checkpoint(conn, "PASSIVE")
            self._checkpoint(conn, "TRUNCATE")  # the writer and readers are closed by now
        finally:
            conn.close()

    @staticmethod
    def _checkpoint(conn: Connection, mode: str) -> None:
        try:
            conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
        except sqlite3.Error as exc:
            log.warning("WAL checkpoint failed (will retry): %s", exc)
