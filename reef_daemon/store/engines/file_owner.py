"""One daemon per SQLite file: a daemon holds a lock beside the file while it runs, and a second one refuses to
start, naming the first (its pid and URL), instead of starting and failing its writes.

The lock is a process's: stores one process opens on the same file (an in-process restart, a store copy's reader)
share it, and it is let go when the last of them closes."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path

from reef_daemon.store.engines.engine import StoreUnavailable

SUFFIX = ".owner"
_HELD: dict[Path, tuple[int, int]] = {}  # this process's locks: the lock file's descriptor, how many stores hold it


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
        key = self.path.resolve()
        if key in _HELD:
            fd, holders = _HELD[key]
            _HELD[key] = (fd, holders + 1)
            self._fd = fd
            return
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
        _HELD[key] = (fd, 1)
        self.note(None)

    def note(self, url: str | None) -> None:
        """Write who holds the lock: this process, and the URL it answers on once it listens."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):  # only a second daemon's message is the poorer for it (a full disk)
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, json.dumps({"pid": os.getpid(), "url": url}).encode(), 0)

    def release(self) -> None:
        if self._fd is None:
            return
        key = self.path.resolve()
        fd, holders = _HELD.pop(key, (self._fd, 1))
        if holders > 1:
            _HELD[key] = (fd, holders - 1)
        else:
            os.close(fd)  # closing the file lets the lock go
        self._fd = None


def _holder(fd: int) -> str:
    """`pid N at URL`, as the holder wrote it."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        said = json.loads(os.pread(fd, 4096, 0) or b"{}")
        pid, url = said.get("pid"), said.get("url")
        return f"pid {pid} at {url}" if url else f"pid {pid}, still starting"
    return "its pid unknown"
