"""The agent proposer's tools as the daemon serves them to one proposer run, on the socket of the agent's jail
(`POST /reef-step/{check|trial|notes}`, with the token lent for this run): `check` runs admission on the workspace
exactly as the step will; `trial` runs the scenario's agent on the workspace's candidate (`agent_trial.py`),
counted against the run's trials and bounded by the time per trial and the time the run has left; `notes` keeps
working notes. The commands in the jail (`agent_tools.py`) only ask for these, so the bounds hold whatever code
the agent runs, and what the tools did (the evidence, the progress) is what the daemon saw, not what the jail wrote.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from aiohttp import web

from adapters import Adapter
from recipes.reefine.agent_trial import TrialRun
from recipes.reefine.workspace import read_back, snapshot
from reef_daemon.recipe_api import BadPattern, Refused, admit, compiled, json_response, presented_token, search
from reef_harness import Entry

ROUTE = "/reef-step/{tool}"
FINISH_RESERVE_S = 15.0  # a trial never runs into the last seconds of the run: the agent needs them to stop
ANSWER_LIMIT = 4000
NOTES_LIMIT = 32 * 1024
PROMPT_LIMIT = 8000
StartTrial = Callable[[list[Entry], str, Mapping[str, str], float], Awaitable[TrialRun]]


class StepTools:
    """The tools of one proposer run on `workspace` (laid out from `tree`): at most `trials` trials of at most
    `trial_s` seconds each, none past `deadline` (a `time.time()`), started by `start_trial` (None: the scenario's
    agent is not installed here, and `no_trial` says so); requests must present `token`."""

    def __init__(
        self,
        adapter: Adapter,
        tree: list[Entry],
        workspace: Path,
        limits: tuple[int, float, float],
        start_trial: StartTrial | None,
        no_trial: str,
        token: str,
    ) -> None:
        self._adapter = adapter
        self._tree = tree
        self._workspace = workspace
        self.trials_max, self._trial_s, self._deadline = limits
        self._start_trial = start_trial
        self._no_trial = no_trial
        self.token = token
        self._lock = asyncio.Lock()  # one trial at a time
        self.events: list[dict[str, Any]] = []  # what each tool did, oldest first
        self.trials: list[dict[str, Any]] = []
        self.notes = ""

    def routes(self) -> list[web.RouteDef]:
        return [web.post(ROUTE, self._serve)]

    async def _serve(self, request: web.Request) -> web.Response:
        presented = presented_token(request.headers) or ""
        if not hmac.compare_digest(presented.encode(), self.token.encode()):
            return _answer("refused: this tool needs the token lent for this run", 1, 401)
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return _answer("refused: the request is not a JSON object", 1, 400)
        tool = request.match_info["tool"]
        if tool == "check":
            return _answer(*await self.check())
        if tool == "trial":
            expect, project = body.get("expect"), body.get("workspace")
            return _answer(
                *await self.trial(
                    str(body.get("prompt", "")),
                    None if expect is None else str(expect),
                    None if project is None else str(project),
                )
            )
        if tool == "notes":
            return _answer(*self.note(str(body.get("text", ""))))
        return _answer(f"refused: no tool {tool!r} (check, trial, notes)", 1, 404)

    def time_left(self) -> float:
        return max(0.0, self._deadline - time.time())

    def _event(self, tool: str, text: str, **details: Any) -> None:
        self.events.append({"at": time.time(), "tool": tool, "text": text, **details})

    async def _candidate(self) -> tuple[list[Entry], list[str], list[str]]:
        """(admitted candidate, refusals, not-applied reports) for the workspace as it is now."""

        def read() -> tuple[list[Entry], list[str], list[str]]:
            back = read_back(self._workspace, self._tree, self._adapter)
            try:
                return admit(self._tree, back.mutations, self._adapter), [], back.reported
            except Refused as exc:
                return [], exc.reasons, back.reported

        return await asyncio.to_thread(read)

    async def check(self) -> tuple[str, int]:
        entries, refusals, reported = await self._candidate()
        lines = [f"not applied: {line}" for line in reported]
        if refusals:
            lines += [f"refused: {reason}" for reason in refusals]
            self._event("check", f"harness-check: refused ({len(refusals)}): " + " ".join(refusals)[:400])
            return "\n".join(lines), 1
        changed = sorted({entry.id for entry in entries} ^ {entry.id for entry in self._tree})
        changes = ", ".join(changed) or "none"
        lines.append(f"admitted: the candidate has {len(entries)} entries (added or removed: {changes})")
        lines.append(f"time left: {self.time_left():.0f} s")
        self._event("check", f"harness-check: admitted ({len(entries)} entries)")
        return "\n".join(lines), 0

    async def trial(self, prompt: str, expect: str | None, project: str | None) -> tuple[str, int]:
        if self._start_trial is None:
            return f"refused: no trial can run: {self._no_trial}", 1
        if not prompt.strip():
            return "refused: the trial needs a prompt", 1
        if expect is not None:
            try:
                compiled(expect)
            except BadPattern as exc:
                return f"refused: --expect {exc}", 1
        files = await asyncio.to_thread(self._project, project) if project is not None else {}
        if files is None:
            return f"refused: --workspace {project!r} is not a folder of files inside the workspace", 1
        async with self._lock:
            return await self._trial(self._start_trial, prompt[:PROMPT_LIMIT], expect, files)

    async def _trial(
        self, start: StartTrial, prompt: str, expect: str | None, files: Mapping[str, str]
    ) -> tuple[str, int]:
        if len(self.trials) >= self.trials_max:
            self._event("trial-refused", f"harness-trial: refused: all {self.trials_max} trials are spent")
            spent = f"refused: this run may make {self.trials_max} trials; all are spent."
            return spent + " Finish the current candidate.", 1
        left = self.time_left() - FINISH_RESERVE_S
        if left <= 1:
            self._event("trial-refused", "harness-trial: refused: no time is left for a trial")
            return "refused: no time is left for a trial. Finish the current candidate.", 1
        entries, refusals, _reported = await self._candidate()
        if refusals:
            return "\n".join(["refused: admission refuses the workspace; run harness-check and fix it first:",
                              *(f"  {reason}" for reason in refusals)]), 1  # fmt: skip
        timeout = min(self._trial_s, left)
        number = len(self.trials) + 1
        bound = f"{number} of {self.trials_max}, at most {timeout:.0f} s"
        self._event("trial-start", f"harness-trial ({bound}): {prompt[:120]}")
        run = await start(entries, prompt, files, timeout)
        found = None if expect is None else await search(expect, run.answer)
        matched = None if found is None else found.matched
        shown = "timed out" if run.timed_out else f"exit {run.exit_code}"
        lines = [f"final answer ({shown}, {run.seconds:.1f} s):", run.answer[-ANSWER_LIMIT:] or "(nothing)"]
        lines.append(f"tool calls ({len(run.tool_calls)}):" + "".join(f"\n  {call}" for call in run.tool_calls[-30:]))
        if found is not None and found.problem is not None:
            # checked above, so the one problem left is time
            too_long = f"the pattern took too long ({found.problem}); write a simpler one"
            lines.append(f"expect /{expect}/: did NOT match: {too_long}")
        elif found is not None:
            lines.append(f"expect /{expect}/: {'matched' if matched else 'did NOT match'}")
        if run.timed_out:
            lines.append(f"the trial was stopped at its bound of {timeout:.0f} s, with everything it started")
        lines.append(f"time left: {self.time_left():.0f} s")
        outcome = "expect matched" if matched else "expect not matched" if expect else "ran"
        outcome = "timed out" if run.timed_out else outcome
        record = {"prompt": prompt[:2000], "expect": expect, "matched": matched, "seconds": run.seconds,
                  "exit_code": run.exit_code, "timed_out": run.timed_out, "answer": run.answer[-ANSWER_LIMIT:],
                  "tool_calls": run.tool_calls[-30:]}  # fmt: skip
        self.trials.append(record)
        text = f"harness-trial: {outcome} in {run.seconds:.1f} s ({len(run.tool_calls)} tool calls): {prompt[:120]}"
        self._event("trial", text, **record)
        passed = not run.timed_out and run.exit_code == 0 and matched is not False
        return "\n".join(lines), 0 if passed else 1

    def _project(self, folder: str) -> dict[str, str] | None:
        """The files of the workspace's `folder`, read without following links; None where there are none."""
        parts = PurePosixPath(folder).parts
        if not parts or PurePosixPath(folder).is_absolute() or any(part in ("..", ".") for part in parts):
            return None
        prefix = "/".join(parts) + "/"
        files = snapshot(self._workspace)
        found = {path[len(prefix) :]: text for path, text in files.items() if path.startswith(prefix)}
        return found or None

    def note(self, text: str) -> tuple[str, int]:
        if len(self.notes) + len(text) > NOTES_LIMIT:
            return f"refused: the notes are kept up to {NOTES_LIMIT // 1024} KiB; they are full", 1
        self.notes += text.rstrip() + "\n"
        self._event("notes", f"harness-notes: {' '.join(text.split())[:300]}")
        return f"noted. time left: {self.time_left():.0f} s", 0


def _answer(output: str, code: int, status: int = 200) -> web.Response:
    return json_response({"output": output, "code": code}, status=status)
