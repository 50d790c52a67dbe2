"""The trial run: before a candidate is published, start the adapter's agent on it once, headless, and ask it one
offline health prompt through this daemon.

The candidate is rendered with reef's own entries and a model binding into a throwaway root outside any project
(fresh HOME, empty workspace), exactly as an install would write it. The agent runs in a bubblewrap jail
(`reef_daemon/harness/jail.py`: no network, files read-only, the person's home and the daemon's state hidden; the
model through a socket), or with `harness.sandbox = none` as a plain child in its own session. Either way its
environment is minimal: PATH, the agent's own variables, and a token lent by the gate that is good only for model
calls and only while the trial runs; the daemon's tokens never reach it. Its model calls are recorded under the
`reef-trials` scenario, tagged with what was tried.

A trial proves only that the tree still works (the agent starts, loads it and answers); it says nothing about
whether the change does what was asked: that is the review's and the person's call.
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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from adapters import SESSION_ENV, Adapter, Binding, find_agent, not_found
from reef_daemon.auth import TokenGate
from reef_daemon.contract import TOKEN_ENV
from reef_daemon.harness.install.files import bound_files
from reef_daemon.harness.jail import BWRAP, JAIL_PORT, NO_BWRAP, jail_argv, model_socket, needed_paths
from reef_daemon.names import TRIAL_SCENARIO
from reef_harness import Entry

HEALTH_PROMPT = "This is a health check. Reply with exactly one word, reef-ok, and nothing else."
HEALTHY_ANSWER = "reef-ok"
OFF = "off"
AUTO = "auto"
NO_TOKEN = "none"  # noqa: S105 - agents want some key; a daemon without auth ignores it
OUTPUT_LIMIT = 64 * 1024  # bytes kept from the end of each of the agent's streams
SHOWN_LIMIT = 600  # characters of the agent's own words a reason quotes


@dataclass(frozen=True)
class Trial:
    """What one trial run showed. `ran` is False when no agent was started (and `reason` says why)."""

    ran: bool
    passed: bool
    reason: str
    seconds: float | None = None
    exit_code: int | None = None
    answer: str | None = None

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
        self._gate: TokenGate | None = None

    def listening(self, url: str, gate: TokenGate) -> None:
        self._url = url
        self._gate = gate

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
        binary, bwrap, why = self.plan()
        if binary is None:
            return not_run(why)
        if self._url is None or self._gate is None:
            return not_run("the daemon is not listening yet, so the agent would have no model to call")
        root = Path(tempfile.mkdtemp(prefix="reef-trial-"))
        try:
            with self._gate.lend(TRIAL_SCENARIO) as token:
                if bwrap is None:
                    binding = Binding(self._url, TRIAL_SCENARIO, model, label)
                    return await self._run_in(root, binary, entries, binding, token, None)
                async with model_socket(root, self._url, TRIAL_SCENARIO):
                    binding = Binding(f"http://127.0.0.1:{JAIL_PORT}", TRIAL_SCENARIO, model, label)
                    return await self._run_in(root, binary, entries, binding, token, bwrap)
        finally:
            await asyncio.to_thread(shutil.rmtree, root, True)

    async def _run_in(
        self, root: Path, binary: str, entries: list[Entry], binding: Binding, token: str | None, bwrap: str | None
    ) -> Trial:
        name = self._adapter.binary
        for relative, text in bound_files(self._adapter, entries, binding).items():  # admission made sure it installs
            target = root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        for folder in ("home", "workspace", "tmp"):
            (root / folder).mkdir()
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
        argv = [binary, *agent.args(root, agent.headless(HEALTH_PROMPT))]
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
            return Trial(ran=False, passed=False, reason=f"not run: {binary} could not start: {exc.strerror or exc}")
        assert process.stdout is not None and process.stderr is not None
        try:
            stdout, stderr, code = await asyncio.wait_for(
                asyncio.gather(_tail(process.stdout), _tail(process.stderr), process.wait()), self._timeout_s
            )
        except TimeoutError:
            return Trial(True, False, f"{name} did not answer within {self._timeout_s:g} s", self._timeout_s)
        finally:
            _end_group(process)
            await process.wait()
        seconds = round(time.monotonic() - started, 2)
        answer = _last_line(stdout)
        if code != 0:
            said = _shown(stderr) or _shown(stdout) or "it printed nothing"
            return Trial(True, False, f"{name} exited with status {code}: {said}", seconds, code, answer)
        if answer is None:
            return Trial(True, False, f"{name} exited without printing an answer", seconds, code)
        replied = "reef-ok" if answer == HEALTHY_ANSWER else f"{answer[:120]!r} (not reef-ok; the model chose)"
        return Trial(
            True, True, f"{name} started on it and answered in {seconds:g} s: {replied}", seconds, code, answer
        )


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
