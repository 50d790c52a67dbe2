"""The jail as a normal (non-root) user: it starts, and a probe inside cannot read the daemon's state, write outside
its root, or reach the network, though the same user outside the jail could do all three."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from reef_daemon.harness.jail import jail_argv

NOBODY = 65534
PROBE = """
id -u
cat {secret} && echo READ-STATE
touch {outside}/escaped && echo WROTE-OUTSIDE
echo here > workspace-file && echo WROTE-WORKSPACE
(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo REACHED-PORT
true
"""


@pytest.fixture
def listener() -> Iterator[int]:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


def as_nobody(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    setpriv = shutil.which("setpriv")
    if os.geteuid() == 0:
        if setpriv is None:
            pytest.skip("setpriv is not installed, so the test cannot drop to a normal user")
        argv = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", *argv]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def test_the_jail_starts_as_a_normal_user_and_holds_the_probe(listener: int) -> None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("bubblewrap is not installed")
    base = Path(tempfile.mkdtemp(prefix="reef-jail-", dir="/var/tmp"))  # tmp_path is closed to another user
    try:
        state, root, outside = base / "state", base / "root", base / "outside"
        for folder in (state, root / "workspace", outside):
            folder.mkdir(parents=True)
        (state / "secret").write_text("daemon state\n")
        for path in (base, state, outside):
            path.chmod(0o777 if path == outside else 0o755)
        (state / "secret").chmod(0o644)
        user = NOBODY if os.geteuid() == 0 else os.getuid()
        if os.geteuid() == 0:
            for folder in (root, root / "workspace"):
                os.chown(folder, NOBODY, NOBODY)
        # Outside the jail the normal user reads the state, writes the other folder and reaches the port.
        script = PROBE.format(secret=state / "secret", outside=outside, port=listener)
        free = as_nobody(["bash", "-c", script], root / "workspace")
        assert "READ-STATE" in free.stdout and "WROTE-OUTSIDE" in free.stdout and "REACHED-PORT" in free.stdout
        (outside / "escaped").unlink()

        argv = jail_argv(bwrap, root, [state], [], {"PATH": "/usr/bin:/bin"}, [])
        jailed = as_nobody([*argv[: argv.index("--")], "--", "bash", "-c", script], root / "workspace")

        assert jailed.returncode == 0, jailed.stderr
        assert jailed.stdout.split() == [str(user), "WROTE-WORKSPACE"], jailed
        assert not (outside / "escaped").exists()
        assert (root / "workspace" / "workspace-file").read_text() == "here\n"
    finally:
        shutil.rmtree(base, ignore_errors=True)
