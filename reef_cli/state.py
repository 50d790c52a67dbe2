"""The files `reef start` leaves in the state directory: the daemon's pid, URL and log."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from reef_contract import DEFAULT_STATE_DIR


@dataclass(frozen=True)
class DaemonFiles:
    """Where a background daemon started from this state directory is described."""

    state_dir: Path

    @property
    def pid_file(self) -> Path:
        return self.state_dir / "daemon.pid"

    @property
    def url_file(self) -> Path:
        return self.state_dir / "daemon.url"

    @property
    def log_file(self) -> Path:
        return self.state_dir / "daemon.log"

    def pid(self) -> int | None:
        """The recorded pid, if a file holds one."""
        text = _read(self.pid_file)
        return int(text) if text and text.isdigit() else None

    def url(self) -> str | None:
        """The recorded URL of the daemon, if `reef start` wrote one."""
        return _read(self.url_file) or None

    def running_pid(self) -> int | None:
        """The recorded pid when that process is still alive, else None."""
        pid = self.pid()
        return pid if pid is not None and process_alive(pid) else None

    def write_pid(self, pid: int) -> None:
        """Record the pid of the daemon just started."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.pid_file.write_text(f"{pid}\n", encoding="utf-8")

    def write_address(self, url: str) -> None:
        """Record where the daemon listens, once it answers."""
        self.url_file.write_text(f"{url}\n", encoding="utf-8")

    def clear(self) -> None:
        """Forget the daemon (its log stays)."""
        for path in (self.pid_file, self.url_file):
            path.unlink(missing_ok=True)


def running_here(base: Path = DEFAULT_STATE_DIR) -> list[DaemonFiles]:
    """The daemons started from this directory that still run: the one keeping state in `base` and those in its
    folders (a recipe's profile keeps its state in `.reef/<recipe>`)."""
    folders = [base, *sorted(path for path in base.glob("*") if path.is_dir())] if base.is_dir() else []
    return [files for files in map(DaemonFiles, folders) if files.url() and files.running_pid() is not None]


def process_alive(pid: int) -> bool:
    """True when a process with this pid exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = _read(Path(f"/proc/{pid}/stat"))
    # Field 3 of /proc/<pid>/stat is the state; Z is a zombie (exited, not yet reaped by its parent).
    return not (stat and stat.rpartition(")")[2].split()[:1] == ["Z"])


def _read(path: Path) -> str:
    with contextlib.suppress(OSError):
        return path.read_text(encoding="utf-8").strip()
    return ""
