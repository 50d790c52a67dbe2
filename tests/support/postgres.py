"""A throwaway PostgreSQL server for the tests: `initdb` in a temporary folder, its own port and socket folder,
stopped (and its folder removed) at the end of the run; as root, it runs as the `postgres` user, since PostgreSQL
refuses to run as root. Each test gets a database of its own (`postgres_url`).

scripts/setup installs the server (the `postgresql` package); without it these tests fail, saying so, rather than
skip.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

MISSING = "the PostgreSQL server is not installed (initdb not found); run scripts/setup, or apt-get install postgresql"


def server_binaries() -> Path:
    """The folder of initdb and pg_ctl: on PATH, or Debian's /usr/lib/postgresql/N/bin (the newest)."""
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if not versions:
        raise RuntimeError(MISSING)
    return Path(versions[-1]).parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PostgresServer:
    """A running server; `database()` makes a fresh, empty database and returns its URL."""

    folder: Path
    port: int
    user: str
    bin: Path
    run_as: str | None
    _numbers: Iterator[int] = field(default_factory=itertools.count)

    @property
    def admin_url(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"

    def url(self, database: str) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def socket_url(self, url: str) -> str:
        """The same database (a URL of `url` or `database`) through the server's Unix-domain socket."""
        return f"postgresql://{self.user}@/{url.rsplit('/', 1)[-1]}?host={self.folder}&port={self.port}"

    def database(self) -> str:
        name = f"reef_test_{os.getpid()}_{next(self._numbers)}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def pg_ctl(self, *args: str) -> None:
        """Run pg_ctl on this server (stop, start, restart …), as the server's user."""
        data = str(self.folder / "data")
        command = [str(self.bin / "pg_ctl"), "-D", data, "-w", "-l", str(self.folder / "server.log"), *args]
        subprocess.run(command, check=True, capture_output=True, user=self.run_as)

    def stop(self) -> None:
        self.pg_ctl("stop", "-m", "fast")

    def signal(self, number: signal.Signals) -> None:
        """Send a signal to every process of the server, the postmaster and each backend it forked (each in a
        session of its own): SIGSTOP makes it stop answering, its connections left open; SIGCONT lets it go on."""
        postmaster = int((self.folder / "data" / "postmaster.pid").read_text().split()[0])
        for pid in [postmaster, *_children(postmaster)]:
            with contextlib.suppress(ProcessLookupError):  # a backend that ended meanwhile
                os.kill(pid, number)

    def start(self) -> None:
        self.pg_ctl("start", "-o", f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1")


def _children(parent: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # pid (comm) state ppid …: the command may hold spaces and parentheses, so read after its last ")"
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == parent:
                found.append(int(stat.parent.name))
    return found


@contextlib.contextmanager
def running_server(*, fsync: bool = False, settings: Sequence[str] = ()) -> Iterator[PostgresServer]:
    """Start a server for as long as the block runs; without `fsync` (the tests) it trades crash safety of its
    throwaway data for speed. `settings`: more postgresql.conf lines (`name = value`)."""
    binaries = server_binaries()
    run_as = "postgres" if os.geteuid() == 0 else None
    user = run_as or pwd.getpwuid(os.geteuid()).pw_name
    folder = Path(tempfile.mkdtemp(prefix="reef-pg-"))
    if run_as is not None:
        shutil.chown(folder, run_as)
    server = PostgresServer(folder, _free_port(), user, binaries, run_as)
    try:
        subprocess.run(
            [str(binaries / "initdb"), "-D", str(folder / "data"), "-A", "trust", "-U", user, "-E", "UTF8",
             "--no-sync"],
            check=True,
            capture_output=True,
            user=run_as,
        )  # fmt: skip
        with (folder / "data" / "postgresql.conf").open("a") as conf:
            conf.write("max_connections = 200\n")  # enough for several daemons
            if not fsync:
                conf.write("fsync = off\nfull_page_writes = off\n")
            for setting in settings:
                conf.write(f"{setting}\n")
        server.start()
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError, FileNotFoundError):
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
