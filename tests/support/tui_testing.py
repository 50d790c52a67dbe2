"""What TUI tests share: a daemon `reef start` ran in front of a fake model (with cli_testing's helpers, times in
UTC), and waiting inside a Pilot test for something the app shows, never for a length of time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from tests.support.cli_testing import Daemon, ModelThread, clean_env, wait_until
from tests.support.cli_testing import start_daemon as start_any_daemon

__all__ = ["Daemon", "ModelThread", "start_daemon", "until", "wait_until"]

ATTEMPTS = 1200


def start_daemon(workdir: Path, upstream_url: str, *extra: str, port: int = 0) -> Daemon:
    """`reef start` on `port` (0: a free one) with times in UTC; `extra` are more serve settings."""
    return start_any_daemon(
        workdir, upstream_url, "--reef.state-dir", ".reef", *extra, env=clean_env(TZ="UTC"), port=port
    )


async def until(pilot: Pilot[Any], condition: Callable[[], Any], what: str) -> Any:
    """Let the app run until `condition()` is truthy; fail naming `what` if it never is."""
    for _ in range(ATTEMPTS):
        value = condition()
        if value:
            return value
        await pilot.pause(0.05)
    raise AssertionError(f"gave up waiting for {what}")
