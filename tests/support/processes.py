"""This test process's children, read from /proc: for tests that wait until a daemon running in the test (in this
process) has started a child of its own, or check that one is gone."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

PROC = Path("/proc")


def children() -> dict[int, bytes]:
    """The live (not zombie) children of this process, with their command lines (arguments NUL-separated)."""
    found: dict[int, bytes] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            state, parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
            if int(parent) == os.getpid() and state != "Z":
                found[int(entry.name)] = (entry / "cmdline").read_bytes()
    return found
