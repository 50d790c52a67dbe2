"""One daemon per SQLite file: a daemon holds a lock beside the file while it runs, and a second one refuses to
start, naming the first (its pid and URL), instead of starting and failing its writes."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path

from reef_daemon.store.engine import StoreUnavailable

SUFFIX = ".owner"


class StoreInUse(StoreUnavailable):
    """Another daemon holds the SQLite file."""


class FileOwner:
    """The lock on `<database>.owner`, held from `claim` to `release`; the file says who holds it."""

    def __init__(self, database: str) -> None:
        self.database = database
        self.path = Path(database + SUFFIX)
        self._fd: int | None = None

    def claim(self) -> None:
        """Take the lock, or StoreInUse naming the daemon that holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise StoreInUse(
                f"another reef daemon ({holder}) is using the store {self.database}; stop it "
                "(`reef stop` in its folder) or start this one with its own reef.state-dir"
            ) from None
        self._fd = fd
        self.note(None)

    def note(self, url: str | None) -> None:
        """Write who holds the lock: this process, and the URL it answers on once it listens."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):  # only a second daemon's message is the poorer for it (a full disk)
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, json.dumps({"pid": os.getpid(), "url": url}).encode(), 0)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the file lets the lock go
            self._fd = None


def _holder(fd: int) -> str:
    """`pid N at URL`, as the holder wrote it."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        said = json.loads(os.pread(fd, 4096, 0) or b"{}")
        pid, url = said.get("pid"), said.get("url")
        return f"pid {pid} at {url}" if url else f"pid {pid}, still starting"
    return "its pid unknown"
