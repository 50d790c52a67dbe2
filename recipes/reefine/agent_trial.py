"""One `harness-trial` of the agent proposer, run by the daemon outside the proposer's jail: the candidate rendered
as an install into a fresh throwaway root, the scenario's agent started on it headless with the proposer's prompt
in a fresh jail of its own (or as a plain child with `harness.sandbox = none`), its model calls relayed through a
socket of its own that counts them against the step's budget, and it and everything it started stopped at its
time bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from adapters import SESSION_ENV, Adapter, Binding
from recipes.reefine.transcripts import tool_calls
from reef_contract import TOKEN_ENV, TRIAL_SCENARIO
from reef_daemon.recipe_api import Budget, bound_files, jail_argv, model_endpoint, needed_paths
from reef_harness import Entry

NO_TOKEN = "none"  # noqa: S105 - agents want some key; a daemon without auth ignores it
OUTPUT_LIMIT = 64 * 1024  # bytes kept from the end of what the trial agent printed


@dataclass(frozen=True)
class TrialAgent:
    """How the trials of one proposer run start the scenario's agent: its binary, the jail (`bwrap`, or None for
    none) and what it hides, the daemon, the served model, the tag of its model calls, the lent token, the budget."""

    adapter: Adapter
    binary: str
    bwrap: str | None
    hidden: list[Path]
    daemon_url: str
    model: str
    label: str
    token: str | None
    budget: Budget


@dataclass(frozen=True)
class TrialRun:
    """What one trial did: the end of what the agent printed, its exit status (None when it was stopped at the
    time bound), how long it ran, and the tool calls its session log shows."""

    answer: str
    exit_code: int | None
    seconds: float
    timed_out: bool
    tool_calls: list[str]


async def run_trial(
    agent: TrialAgent, entries: list[Entry], prompt: str, project: Mapping[str, str], timeout_s: float
) -> TrialRun:
    """Run the agent on `entries` with `prompt`, in a project holding the `project` files; stop it at `timeout_s`."""
    root = Path(tempfile.mkdtemp(prefix="reef-agent-trial-"))
    try:
        async with model_endpoint(
            root, agent.daemon_url, TRIAL_SCENARIO, agent.bwrap is not None, agent.budget, token=agent.token
        ) as url:
            binding = Binding(url, TRIAL_SCENARIO, agent.model, agent.label)
            _lay_out(root, agent.adapter, entries, binding, project)
            return await _run(agent, root, binding, prompt, timeout_s)
    finally:
        await asyncio.to_thread(shutil.rmtree, root, True)


def _lay_out(root: Path, adapter: Adapter, entries: list[Entry], binding: Binding, project: Mapping[str, str]) -> None:
    for relative, text in bound_files(adapter, entries, binding).items():
        _write(root / relative, text)
    for folder in ("home", "tmp", "workspace"):
        (root / folder).mkdir(exist_ok=True)
    for relative, text in project.items():
        _write(root / "workspace" / relative, text)


def _write(target: Path, text: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


async def _run(agent: TrialAgent, root: Path, binding: Binding, prompt: str, timeout_s: float) -> TrialRun:
    side = agent.adapter.agent
    session = uuid.uuid4().hex
    token = NO_TOKEN  # the relay presents the lent token; the agent holds none
    env = {
        "PATH": os.pathsep.join([str(Path(agent.binary).parent), os.environ.get("PATH", os.defpath)]),
        "HOME": str(root / "home"),
        "TMPDIR": str(root / "tmp"),
        "LANG": "C.UTF-8",
        TOKEN_ENV: token,
        SESSION_ENV: session,
        **side.session_env(binding, session, token),
        **side.env(root, binding),
        **side.offline_env,
    }
    argv = [agent.binary, *side.args(root, side.headless(prompt))]
    if agent.bwrap is not None:
        argv = jail_argv(agent.bwrap, root, [Path.home(), *agent.hidden], needed_paths(agent.binary), env, argv)
        env = {"PATH": env["PATH"], "LANG": env["LANG"]}  # bwrap's own; the jail starts from a clean one
    output = root / "output"
    started = time.monotonic()
    timed_out = False
    with output.open("wb+") as out:
        try:
            process = await asyncio.create_subprocess_exec(
                *argv, cwd=root / "workspace", env=env, stdin=asyncio.subprocess.DEVNULL, stdout=out,
                stderr=asyncio.subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            return TrialRun(f"{agent.binary} could not start: {exc.strerror or exc}", None, 0.0, False, [])
        try:
            await asyncio.wait_for(process.wait(), timeout_s)
        except TimeoutError:
            timed_out = True
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
        out.seek(max(0, out.seek(0, 2) - OUTPUT_LIMIT))
        answer = out.read().decode("utf-8", "replace").strip()
    seconds = round(time.monotonic() - started, 2)
    code = None if timed_out else process.returncode
    return TrialRun(answer, code, seconds, timed_out, await asyncio.to_thread(tool_calls, root))
