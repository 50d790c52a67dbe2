"""Following a change request to its end and saying what came of it, for `reef request`, `reef requests` and the
wrappers' `request` alike: the polling, the words for the outcome and the exit status that goes with it."""

from __future__ import annotations

import time
from collections.abc import Callable

from reef_client._client import ReefClient
from reef_daemon.contract import Activity, RequestProgress

POLL_S = 1.0
PUBLISHED = ("selected", "pending")
"""The results that publish a version."""
EXIT_TIMED_OUT = 2


def follow_request(
    client: ReefClient,
    request_id: str,
    timeout_s: float,
    on_progress: Callable[[RequestProgress, list[Activity]], None] | None = None,
) -> RequestProgress:
    """Read the request's progress about once a second until it settles or `timeout_s` passes, and return where it
    stands then. `on_progress` gets each reading and the activity entries new since the one before (for the agent
    proposer: each tool call, check and trial)."""
    deadline = time.monotonic() + timeout_s
    shown = 0
    while True:
        progress = client.request_progress(request_id)
        if on_progress is not None:
            on_progress(progress, progress["activity"][shown:])
        shown = len(progress["activity"])
        if progress["state"] == "settled" or time.monotonic() >= deadline:
            return progress
        time.sleep(POLL_S)


def request_status(progress: RequestProgress) -> int:
    """The exit status of a command that followed the request: 0 published, 1 rejected or skipped, 2 still
    running."""
    if progress["state"] != "settled":
        return EXIT_TIMED_OUT
    return 0 if progress.get("result") in PUBLISHED else 1


def request_outcome(progress: RequestProgress) -> list[str]:
    """Where the request stands, in lines for a person: still running (and how to wait for it), or its result,
    version, why, and how to use what it published."""
    if progress["state"] != "settled":
        return [
            f"request {progress['id']} is still {progress['state']}; wait for it with: reef requests {progress['id']}"
            " --wait (filing it again would make a second request)"
        ]
    result = progress["result"]
    release_id = progress.get("release")
    release = f" (release {release_id[:8]})" if release_id else ""
    version = progress.get("version")
    lines = [f"{result}: {version}{release}" if version else f"{result}{release}"]
    if result == "pending":
        lines.append(
            f"it changes an extension, so it serves only after: reef promote --scenario {progress['scenario']} "
            f"{progress['version']}"
        )
    if progress.get("reason"):
        lines.append(f"why: {progress['reason']}")
    if progress.get("how_to_use") and result in PUBLISHED:
        lines.append(f"How to use: {progress['how_to_use']}")
    return lines
