"""What TUI tests share: a daemon `reef start` ran in front of a fake model (with cli_testing's helpers, times in
UTC). A Pilot test waits for what the app shows with `eventually(..., pause=pilot.pause)` (tests.support.waiting)."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli_testing import Daemon, ModelThread, clean_env
from tests.support.cli_testing import start_daemon as start_any_daemon

__all__ = ["Daemon", "ModelThread", "start_daemon"]


def start_daemon(workdir: Path, upstream_url: str, *extra: str, port: int = 0) -> Daemon:
    """`reef start` on `port` (0: a free one) with times in UTC; `extra` are more serve settings."""
    return start_any_daemon(
        workdir, upstream_url, "--reef.state-dir", ".reef", *extra, env=clean_env(TZ="UTC"), port=port
    )
