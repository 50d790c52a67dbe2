"""Following a change request to its end and saying what came of it, for `reef request`, `reef requests` and the
wrappers' `request` alike: the polling, the words for the outcome and the exit status that goes with it."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from pathlib import Path

from reef_client._client import ReefClient
from reef_contract import Activity, RequestProgress, RuntimeStatus, small_embedded_model

POLL_S = 1.0
PUBLISHED = ("selected", "pending")
"""The results that publish a version."""
EXIT_TIMED_OUT = 2
WAIT_S = 1800.0
"""How long following a request waits by default."""
SMALL_MODEL_WAIT_S = 600.0
"""How long it waits by default where the served model is the small embedded one, which rarely delivers a change."""
QUIET_S = 30.0
"""After this long with no new activity, a line says the request is still at work."""


def small_model_caution(runtime: RuntimeStatus) -> str | None:
    """What to tell a person filing a change request where the served model is the small embedded one (the torch
    engine's model of under a billion parameters), before the wait starts; None for a capable model."""
    if not small_embedded_model(runtime):
        return None
    return (
        f"the served model is the small embedded one ({runtime.get('model') or 'SmolLM2'}): harness changes need a "
        "capable model, and this one mostly gives no usable change, so the request will likely be skipped. Serve a "
        "capable model with: reef serve --recipe reefine --inference.upstream-url URL --inference.upstream-model NAME"
    )


def wait_bound(timeout_s: float | None, runtime: RuntimeStatus) -> float:
    """The seconds to follow a request: the one asked for, else shorter on the small embedded model."""
    if timeout_s is not None:
        return timeout_s
    return SMALL_MODEL_WAIT_S if small_model_caution(runtime) else WAIT_S


class ProgressLines:
    """The lines a person following a request reads as it runs: each new activity entry (for the agent proposer
    each tool call, check and trial), and, after QUIET_S with none, a line saying it is still at work, so a slow
    model never leaves the screen silent."""

    def __init__(self, quiet_s: float = QUIET_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._quiet_s = quiet_s
        self._clock = clock
        self._started = self._last = clock()

    def __call__(self, progress: RequestProgress, new: list[Activity]) -> list[str]:
        now = self._clock()
        if new:
            self._last = now
            return [f"· {entry['text']}" for entry in new]
        if progress["state"] == "settled" or now - self._last < self._quiet_s:
            return []
        self._last = now
        latest = progress["activity"][-1]["text"] if progress["activity"] else "nothing reported yet"
        return [f"· still {progress['state']} after {_duration(now - self._started)} (last: {latest})"]


def _duration(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


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


def wait_again(request_id: str, url: str | None = None, token_file: Path | None = None) -> str:
    """The command that follows the request again, as it runs where it is printed: with `--url` where the daemon is
    not the one `reef` finds by itself (the first command was given its URL, or a wrapper's install names it), and
    the token read from `token_file` where the first command's came from there."""
    command = f"reef requests {request_id} --wait"
    if url:
        command += f" --url {shlex.quote(url)}"
    if token_file is not None:
        command = f'REEF_TOKEN="$(cat {shlex.quote(str(token_file))})" {command}'
    return command


def request_status(progress: RequestProgress) -> int:
    """The exit status of a command that followed the request: 0 published, 1 rejected or skipped, 2 still
    running."""
    if progress["state"] != "settled":
        return EXIT_TIMED_OUT
    return 0 if progress.get("result") in PUBLISHED else 1


def request_outcome(progress: RequestProgress, again: str | None = None) -> list[str]:
    """Where the request stands, in lines for a person: still running (and how to wait for it: `again`, else
    `wait_again` of its id), or its result, version, why, and how to use what it published."""
    if progress["state"] != "settled":
        return [
            f"request {progress['id']} is still {progress['state']}; wait for it with: "
            f"{again or wait_again(progress['id'])} (filing it again would make a second request)"
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
