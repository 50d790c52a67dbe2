"""The trial run: before a candidate is published, start the adapter's agent on it once, headless, and ask it one
offline health prompt through this daemon.

The candidate is rendered with reef's own entries and a model binding into a throwaway root outside any project
(fresh HOME, empty workspace), exactly as an install would write it. The agent runs in a bubblewrap jail
(`reef_daemon/harness/jail.py`: no network, files read-only, the person's home and the daemon's state hidden; the
model through a socket), or with `harness.sandbox = none` as a plain child in its own session. Either way its
environment is minimal: PATH, the agent's own variables, and a token lent by the gate that is good only for model
calls and only while the trial runs; the daemon's tokens never reach it. Its model calls are recorded under the
`reef-trials` scenario, tagged with what was tried. `execute` is the general run the evaluation gate uses: any
prompt, an optional fixture workspace, tags, a model-call budget and a time limit; it returns the final answer.

A trial proves only that the tree still works (the agent starts, loads it and answers); it says nothing about
whether the change does what was asked: that is the review's and the person's call. Where the evaluation gate
already ran the agent on the tree and it answered, that run shows the same (`stand_in`), and no health prompt runs.
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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from adapters import SESSION_ENV, Adapter, Binding, find_agent, not_found
from reef_contract import TOKEN_ENV, TRIAL_SCENARIO
from reef_daemon.recipe_api import (
    BWRAP,
    NO_BWRAP,
    Budget,
    RecipeContext,
    TokenLender,
    bound_files,
    jail_argv,
    model_endpoint,
    needed_paths,
)
from reef_harness import Entry

HEALTH_PROMPT = "This is a health check. Reply with exactly one word, reef-ok, and nothing else."
HEALTHY_ANSWER = "reef-ok"
OFF = "off"
AUTO = "auto"
NO_TOKEN = "none"  # noqa: S105 - agents want some key; a daemon without auth ignores it
OUTPUT_LIMIT = 64 * 1024  # bytes kept from the end of each of the agent's streams
SHOWN_LIMIT = 600  # characters of the agent's own words a reason quotes
ANSWER_LIMIT = 8000  # characters of a final answer kept for checks and the judge


@dataclass(frozen=True)
class Trial:
    """What one trial run showed. `ran` is False when no agent was started (and `reason` says why)."""

    ran: bool
    passed: bool
    reason: str
    seconds: float | None = None
    exit_code: int | None = None
    answer: str | None = None
    stood_in: str | None = None  # the evaluation task whose run stood in for the health prompt's, if one did

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def not_run(reason: str) -> Trial:
    return Trial(ran=False, passed=False, reason=f"not run: {reason}")


def trial_binary(adapter: Adapter, setting: str) -> tuple[str | None, str]:
    """The agent binary a trial starts, or None and why there is none."""
    if setting == OFF:
        return None, "trials are off (harness.trial = off)"
    if setting == AUTO:
        found = find_agent(adapter.binary)
        if found is None:
            return None, not_found(adapter.binary, adapter.agent.package)
        return found, ""
    return setting, ""


def check_trial_setting(setting: str) -> str | None:
    """Why a `harness.trial` value is unusable, or None: off, auto, or the path of an executable file."""
    if setting in (OFF, AUTO):
        return None
    path = Path(setting)
    if not path.is_absolute():
        return f"harness.trial: '{setting}' is not off, auto or an absolute path to the agent's binary"
    if not path.is_file() or not os.access(path, os.X_OK):
        return f"harness.trial: {setting} is not an executable file"
    return None


class TrialRunner:
    """Trial runs for one adapter. `sandbox` is bwrap (the jail) or none; `hidden` are paths a jailed agent must
    not read besides the person's home (the daemon's state)."""

    def __init__(self, adapter: Adapter, setting: str, timeout_s: float, sandbox: str, hidden: list[Path]) -> None:
        self._adapter = adapter
        self._setting = setting
        self._timeout_s = timeout_s
        self._sandbox = sandbox
        self._hidden = hidden
        self._url: str | None = None
        self._gate: TokenLender | None = None

    def listening(self, context: RecipeContext) -> None:
        """The daemon listens: trial runs reach it at `context.url`, with tokens `context.gate` lends."""
        self._url = context.url
        self._gate = context.gate

    def plan(self) -> tuple[str | None, str | None, str]:
        """(agent, bwrap, why): the agent binary a trial starts and the bubblewrap it starts in (None: no jail);
        or no agent, and why no trial runs."""
        binary, why = trial_binary(self._adapter, self._setting)
        if binary is None or not self.jailed:
            return binary, None, why
        bwrap = shutil.which(BWRAP)
        return (binary, bwrap, "") if bwrap is not None else (None, None, NO_BWRAP)

    def describe(self) -> str:
        """One line for `reef status`: which agent a trial starts and how, or why none runs."""
        binary, bwrap, why = self.plan()
        if binary is None:
            return f"not run: {why}"
        return f"{binary}, in a bubblewrap jail" if bwrap else f"{binary}, WITHOUT a jail (harness.sandbox = none)"

    @property
    def jailed(self) -> bool:
        """Whether trials run in the jail, where model-written code (an extension) may run before review."""
        return self._sandbox == BWRAP

    async def run(self, entries: list[Entry], model: str, label: str) -> Trial:
        """Start the agent on `entries` with the health prompt; `label` tags its model calls (the release tag)."""
        finished = await self.execute(entries, model, HEALTH_PROMPT, release=label)
        return self._health(finished, None)

    def stand_in(self, finished: Finished, task: str, what: str) -> Trial | None:
        """The trial an evaluation run of `task` (`what`, in words) stands in for: the same checks as the health
        prompt's run (the agent started on the tree, exited 0 within its time, printed an answer), or None where
        the run did not pass them (then only a health trial of its own tells a broken tree from a task it could not
        do)."""
        trial = self._health(finished, (task, what))
        return trial if trial.passed else None

    def _health(self, finished: Finished, task: tuple[str, str] | None) -> Trial:
        """What a run shows about the tree; `task` (id, in words) is the evaluation run that stands in for the
        health prompt's."""
        name = self._adapter.binary
        if not finished.started:
            return Trial(ran=False, passed=False, reason=finished.reason)
        if finished.exit_code is None:
            return Trial(True, False, finished.reason, finished.seconds)
        seconds, code = finished.seconds, finished.exit_code
        answer = _last_line(finished.stdout)
        if code != 0:
            said = _shown(finished.stderr) or _shown(finished.stdout) or "it printed nothing"
            return Trial(True, False, f"{name} exited with status {code}: {said}", seconds, code, answer)
        if answer is None:
            return Trial(True, False, f"{name} exited without printing an answer", seconds, code)
        if task is not None:
            where = f"in the evaluation gate's run of {task[1]}, which stands in for the health prompt"
            said = f"{name} started on it and answered in {seconds:g} s, {where}: {answer[:120]!r}"
            return Trial(True, True, said, seconds, code, answer, stood_in=task[0])
        replied = "reef-ok" if answer == HEALTHY_ANSWER else f"{answer[:120]!r} (not reef-ok; the model chose)"
        return Trial(
            True, True, f"{name} started on it and answered in {seconds:g} s: {replied}", seconds, code, answer
        )

    async def execute(
        self,
        entries: list[Entry],
        model: str,
        prompt: str,
        *,
        release: str,
        fixture: Mapping[str, str] | None = None,
        tags: Mapping[str, str] | None = None,
        budget: Budget | None = None,
        timeout_s: float | None = None,
    ) -> Finished:
        """Start the agent on `entries` with `prompt`, `fixture` (relative path to text) written into its workspace;
        its model calls carry `release` and `tags`, and past `budget` are refused. At most `timeout_s` (default: the
        trial timeout)."""
        binary, bwrap, why = self.plan()
        if binary is None:
            return Finished(False, f"not run: {why}")
        if self._url is None or self._gate is None:
            return Finished(False, "not run: the daemon is not listening yet, so the agent would have no model to call")
        root = Path(tempfile.mkdtemp(prefix="reef-trial-"))
        try:
            _write_fixture(root / "workspace", fixture or {})
            with self._gate.lend(TRIAL_SCENARIO) as token:
                jailed = bwrap is not None
                tagged = {"release": release, **(tags or {})}  # whatever the agent itself sends
                async with model_endpoint(root, self._url, TRIAL_SCENARIO, jailed, budget, tagged) as url:
                    binding = Binding(url, TRIAL_SCENARIO, model, release)
                    limit = self._timeout_s if timeout_s is None else min(timeout_s, self._timeout_s)
                    return await self._run_in(root, binary, entries, binding, token, bwrap, prompt, limit)
        finally:
            await asyncio.to_thread(shutil.rmtree, root, True)

    async def _run_in(
        self,
        root: Path,
        binary: str,
        entries: list[Entry],
        binding: Binding,
        token: str | None,
        bwrap: str | None,
        prompt: str,
        timeout_s: float,
    ) -> Finished:
        for relative, text in bound_files(self._adapter, entries, binding).items():  # admission made sure it installs
            target = root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        for folder in ("home", "workspace", "tmp"):
            (root / folder).mkdir(exist_ok=True)
        agent = self._adapter.agent
        session = uuid.uuid4().hex
        env = {
            "PATH": os.pathsep.join([str(Path(binary).parent), os.environ.get("PATH", os.defpath)]),
            "HOME": str(root / "home"),
            "TMPDIR": str(root / "tmp"),
            "LANG": "C.UTF-8",
            TOKEN_ENV: token or NO_TOKEN,
            SESSION_ENV: session,
            **agent.session_env(binding, session, token or NO_TOKEN),
            **agent.env(root, binding),
            **agent.offline_env,
        }
        argv = [binary, *agent.args(root, agent.headless(prompt))]
        if bwrap is not None:
            hidden = [Path.home(), *self._hidden]
            argv = jail_argv(bwrap, root, hidden, needed_paths(binary), env, argv)
            env = {"PATH": env["PATH"], "LANG": env["LANG"]}  # bwrap's own; the jail starts from a clean one
        started = time.monotonic()
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=root / "workspace",
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            return Finished(False, f"not run: {binary} could not start: {exc.strerror or exc}")
        assert process.stdout is not None and process.stderr is not None
        try:
            stdout, stderr, code = await asyncio.wait_for(
                asyncio.gather(_tail(process.stdout), _tail(process.stderr), process.wait()), timeout_s
            )
        except TimeoutError:
            return Finished(True, f"{self._adapter.binary} did not answer within {timeout_s:g} s", timeout_s)
        finally:
            _end_group(process)
            await process.wait()
        return Finished(True, "", round(time.monotonic() - started, 2), code, stdout, stderr)


@dataclass(frozen=True)
class Finished:
    """How one agent run ended: not `started` (and `reason` says why), stopped at its time limit (`exit_code` None,
    `reason` says so), or exited with its streams' ends."""

    started: bool
    reason: str
    seconds: float | None = None
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""

    def answer(self) -> str | None:
        """The agent's final answer: what it printed, bounded to its last ANSWER_LIMIT characters."""
        text = self.stdout.strip()
        if not text:
            return None
        return text if len(text) <= ANSWER_LIMIT else "…" + text[-ANSWER_LIMIT:]

    def failure(self) -> str | None:
        """Why the run gave no answer to judge, or None when it answered."""
        if not self.started or self.exit_code is None:
            return self.reason
        if self.exit_code != 0:
            said = _shown(self.stderr) or _shown(self.stdout) or "it printed nothing"
            return f"exited with status {self.exit_code}: {said}"
        return None if self.answer() else "exited without printing an answer"


def _write_fixture(workspace: Path, fixture: Mapping[str, str]) -> None:
    """The task's files in the agent's workspace; a path that leads outside it is not written."""
    workspace.mkdir(parents=True, exist_ok=True)
    base = workspace.resolve()
    for relative, text in fixture.items():
        target = (workspace / relative).resolve()
        if base not in target.parents:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


async def _tail(stream: asyncio.StreamReader) -> str:
    """Everything the stream gives until it ends, keeping only the last OUTPUT_LIMIT bytes."""
    kept = bytearray()
    while chunk := await stream.read(16384):
        kept += chunk
        del kept[:-OUTPUT_LIMIT]
    return kept.decode("utf-8", "replace")


def _end_group(process: asyncio.subprocess.Process) -> None:
    """Kill whatever the agent left running in its session (it may have started tools)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _last_line(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else None


def _shown(text: str) -> str:
    """The end of what the agent printed, on one line, short enough to quote in a reason."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    joined = " / ".join(lines[-4:])
    return joined if len(joined) <= SHOWN_LIMIT else "…" + joined[-SHOWN_LIMIT:]
