"""One run of the proposing agent: its root (workspace, tool commands, home), the agent started and followed until
it stops or the wall bound stops it with everything it started, and the evidence the step keeps (its checks,
trials and notes, as the daemon's step tools saw them, and the end of its session log)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters import Adapter
from recipes.reefine import agent_tools
from recipes.reefine.step_tools import StepTools
from recipes.reefine.transcripts import tool_calls, transcript
from recipes.reefine.workspace import make_writable, snapshot

TOOLS = {"harness-check": "check", "harness-trial": "trial", "harness-notes": "notes"}
TRANSCRIPT_LIMIT = 32 * 1024
FOLLOW_S = 0.5  # how often the run's logs are read for the progress
Note = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class Bounds:
    wall_s: float
    trial_s: float
    model_calls: int
    trials: int

    def describe(self) -> str:
        return (
            f"at most {self.wall_s:g} s a run, {self.trial_s:g} s a trial, {self.model_calls} model calls and "
            f"{self.trials} trials"
        )


@dataclass(frozen=True)
class Choice:
    """Which proposer answers a request: `agent` and its `binary`, or none and `why` the text proposer does."""

    adapter: Adapter | None
    binary: str | None
    jailed: bool
    why: str

    def describe(self) -> str:
        if self.adapter is None:
            return f"the text proposer: {self.why}"
        where = "in a bubblewrap jail" if self.jailed else "WITHOUT a jail (harness.sandbox = none)"
        return f"the agent proposer: {self.adapter.name} ({self.binary}), {where}"


class AgentRun:
    """The files and the running agent of one proposer run; `tools` are the daemon's step tools it may call."""

    def __init__(self, root: Path, choice: Choice, bounds: Bounds, note: Note) -> None:
        self.root = root
        self.choice = choice
        self.bounds = bounds
        self.note = note
        self.workspace = root / "workspace"
        self.bin = root / "bin"
        for folder in (self.bin, root / "home", root / "tmp"):
            folder.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        self.deadline = time.time() + bounds.wall_s
        self.stopped_at_bound = False
        self.output = ""
        self._events_seen = 0
        self._calls_seen = 0

    def write_tools(self) -> None:
        """The tool commands on the agent's PATH: each runs agent_tools.py, which asks the daemon."""
        client = Path(agent_tools.__file__).resolve()
        for name, tool in TOOLS.items():
            script = self.bin / name
            script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I "{client}" {tool} "$@"\n')
            script.chmod(0o755)

    async def follow(self, argv: list[str], env: dict[str, str], tools: StepTools) -> str:
        """Start the agent and report what it and its tools do until it stops or the wall bound stops it; how it
        stopped."""
        try:
            process = await asyncio.create_subprocess_exec(
                *argv, cwd=self.workspace, env=env, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            return f"it could not start: {exc.strerror or exc}"
        assert process.stdout is not None
        reading = asyncio.ensure_future(_read_all(process.stdout))
        waiting = asyncio.ensure_future(process.wait())
        try:
            while not waiting.done():
                left = self.deadline - time.time()
                if left <= 0:
                    self.stopped_at_bound = True
                    break
                await asyncio.wait([waiting], timeout=min(FOLLOW_S, left))
                await self._report(tools)
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
            self.output = await reading
            await self._report(tools)
        if self.stopped_at_bound:
            return f"stopped at the wall bound of {self.bounds.wall_s:g} s, with everything it started"
        return f"it exited with status {process.returncode}"

    async def _report(self, tools: StepTools) -> None:
        """New tool calls of the agent and new tool runs, as progress lines."""
        calls = tool_calls(self.root / "agent")
        for call in calls[self._calls_seen :]:
            await self.note(f"agent: {call}")
        self._calls_seen = len(calls)
        events = tools.events[self._events_seen :]
        self._events_seen += len(events)
        for line in events:
            await self.note(str(line["text"]))

    def evidence(self, stopped: str, model_calls: int, tools: StepTools) -> dict[str, Any]:
        """What the step keeps of the run."""
        return {
            "agent": self.choice.adapter.name if self.choice.adapter else None,
            "jailed": self.choice.jailed,
            "stopped": stopped,
            "seconds": round(time.monotonic() - self.started, 2),
            "model_calls": model_calls,
            "checks": [line for line in tools.events if line["tool"] == "check"],
            "trials": tools.trials,
            "notes": tools.notes,
            "transcript": transcript(self.root / "agent", TRANSCRIPT_LIMIT) or self.output[-TRANSCRIPT_LIMIT:],
            "workspace": sorted(snapshot(self.workspace)),
        }


async def _read_all(stream: asyncio.StreamReader) -> str:
    kept = bytearray()
    while chunk := await stream.read(16384):
        kept += chunk
        del kept[:-TRANSCRIPT_LIMIT]
    return kept.decode("utf-8", "replace")


def remove(root: Path) -> None:
    make_writable(root)
    shutil.rmtree(root, ignore_errors=True)
