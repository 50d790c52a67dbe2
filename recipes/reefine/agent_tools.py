"""The agent proposer's shell tools, run inside its jail: `harness-check`, `harness-trial` and `harness-notes`.

`main(["check"|"trial"|"notes", ...])`; the commands on the agent's PATH call it. What
they need (the served tree, the adapter, the model, the deadline, the bounds) is in the JSON file named by
`REEF_PROPOSER_STATE`, which reef wrote read-only. Each run appends one line to the evidence log the daemon
follows for the request's progress. Trials reach the model only through the jail's socket, as the agent does.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from adapters import SESSION_ENV, Adapter, Binding, get_adapter
from recipes.reefine.transcripts import tool_calls
from recipes.reefine.workspace import read_back
from reef_daemon.contract import TOKEN_ENV
from reef_daemon.harness.admission import Refused, admit
from reef_daemon.harness.install.files import bound_files
from reef_daemon.names import TRIAL_SCENARIO
from reef_harness import Entry, entries_from_json

STATE_ENV = "REEF_PROPOSER_STATE"
EVENTS = "events.jsonl"
NOTES = "notes.md"
FINISH_RESERVE_S = 15.0  # a trial never runs into the last seconds of the run: the agent needs them to stop
ANSWER_LIMIT = 4000
OUTPUT_LIMIT = 64 * 1024


def state() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(Path(os.environ[STATE_ENV]).read_text())
    return loaded


def event(facts: dict[str, Any], kind: str, text: str, **details: Any) -> None:
    """One line in the evidence log: what a tool did, for the request's progress."""
    line = json.dumps({"at": time.time(), "tool": kind, "text": text, **details}, ensure_ascii=False)
    with (Path(facts["evidence"]) / EVENTS).open("a", encoding="utf-8") as log:
        log.write(line + "\n")


def time_left(facts: dict[str, Any]) -> float:
    return max(0.0, float(facts["deadline"]) - time.time())


def candidate(facts: dict[str, Any]) -> tuple[Adapter, list[Entry], list[str], list[str]]:
    """(adapter, admitted candidate, refusals, not-applied reports) for the workspace as it is now."""
    adapter = get_adapter(facts["adapter"])
    tree = entries_from_json(facts["tree"])
    back = read_back(Path(facts["workspace"]), tree, adapter)
    try:
        return adapter, admit(tree, back.mutations, adapter), [], back.reported
    except Refused as exc:
        return adapter, [], exc.reasons, back.reported


def check(facts: dict[str, Any]) -> int:
    _adapter, entries, refusals, reported = candidate(facts)
    for line in reported:
        print(f"not applied: {line}")
    if refusals:
        for reason in refusals:
            print(f"refused: {reason}")
        event(facts, "check", f"harness-check: refused ({len(refusals)}): " + " ".join(refusals)[:400])
        return 1
    tree = {entry.id for entry in entries_from_json(facts["tree"])}
    ids = sorted({entry.id for entry in entries} ^ tree)
    print(f"admitted: the candidate has {len(entries)} entries (added or removed: {', '.join(ids) or 'none'})")
    print(f"time left: {time_left(facts):.0f} s")
    event(facts, "check", f"harness-check: admitted ({len(entries)} entries)")
    return 0


def trial(facts: dict[str, Any], prompt: str, expect: str | None, fixture: str | None) -> int:
    done = sum(1 for line in read_events(Path(facts["evidence"])) if line.get("tool") == "trial")
    if done >= int(facts["trials_max"]):
        print(f"refused: this run may make {facts['trials_max']} trials; all are spent. Finish the current candidate.")
        return 1
    left = time_left(facts) - FINISH_RESERVE_S
    if left <= 1:
        print("refused: no time is left for a trial. Finish the current candidate.")
        return 1
    adapter, entries, refusals, _reported = candidate(facts)
    if refusals:
        print("refused: admission refuses the workspace; run harness-check and fix it first:")
        for reason in refusals:
            print(f"  {reason}")
        return 1
    timeout = min(float(facts["trial_s"]), left)
    root = Path(facts["trials"]) / f"trial-{done + 1}-{uuid.uuid4().hex[:6]}"
    binding = Binding(facts["model_url"], TRIAL_SCENARIO, facts["model"], facts["label"])
    for relative, text in bound_files(adapter, entries, binding).items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    for folder in ("home", "tmp"):
        (root / folder).mkdir()
    work = root / "workspace"
    if fixture:
        shutil.copytree(Path(facts["workspace"]) / fixture, work)
    else:
        work.mkdir()
    answer, code, seconds, timed_out = _run(facts, adapter, root, binding, prompt, timeout)
    calls = tool_calls(root)
    matched = None if expect is None else re.search(expect, answer) is not None
    print(f"final answer ({'timed out' if timed_out else f'exit {code}'}, {seconds:.1f} s):")
    print(answer[-ANSWER_LIMIT:] or "(nothing)")
    print(f"tool calls ({len(calls)}):" + "".join(f"\n  {call}" for call in calls[-30:]))
    if matched is not None:
        print(f"expect /{expect}/: {'matched' if matched else 'did NOT match'}")
    print(f"time left: {time_left(facts):.0f} s")
    outcome = "timed out" if timed_out else ("expect matched" if matched else "expect not matched" if expect else "ran")
    event(
        facts,
        "trial",
        f"harness-trial: {outcome} in {seconds:.1f} s ({len(calls)} tool calls): {prompt[:120]}",
        prompt=prompt[:2000],
        expect=expect,
        matched=matched,
        seconds=seconds,
        exit_code=code,
        answer=answer[-ANSWER_LIMIT:],
        tool_calls=calls[-30:],
    )
    return 0 if not timed_out and code == 0 and matched is not False else 1


def _run(
    facts: dict[str, Any], adapter: Adapter, root: Path, binding: Binding, prompt: str, timeout: float
) -> tuple[str, int | None, float, bool]:
    binary = str(facts["trial_agent"])
    agent = adapter.agent
    env = {
        "PATH": os.pathsep.join([str(Path(binary).parent), os.environ.get("PATH", os.defpath)]),
        "HOME": str(root / "home"),
        "TMPDIR": str(root / "tmp"),
        "LANG": "C.UTF-8",
        TOKEN_ENV: os.environ.get(TOKEN_ENV, "none"),
        SESSION_ENV: uuid.uuid4().hex,
        **agent.env(root, binding),
        **agent.offline_env,
    }
    argv = [binary, *agent.args(root, agent.headless(prompt))]
    started = time.monotonic()
    with open(root / "tmp" / "stdout", "wb+") as out:
        process = subprocess.Popen(
            argv, cwd=root / "workspace", env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        timed_out = False
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        out.seek(max(0, out.seek(0, 2) - OUTPUT_LIMIT))
        answer = out.read().decode("utf-8", "replace").strip()
    return answer, None if timed_out else process.returncode, round(time.monotonic() - started, 2), timed_out


def notes(facts: dict[str, Any], text: str) -> int:
    with (Path(facts["evidence"]) / NOTES).open("a", encoding="utf-8") as kept:
        kept.write(text.rstrip() + "\n")
    event(facts, "notes", f"harness-notes: {' '.join(text.split())[:300]}")
    print(f"noted. time left: {time_left(facts):.0f} s")
    return 0


def read_events(evidence: Path) -> list[dict[str, Any]]:
    """The evidence log's lines so far (a line being written is left for later)."""
    path = evidence / EVENTS
    if not path.exists():
        return []
    found = []
    for line in path.read_text("utf-8", "replace").splitlines():
        with contextlib.suppress(ValueError):
            found.append(json.loads(line))
    return found


def main(args: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="harness-tools")
    tools = parser.add_subparsers(dest="tool", required=True)
    tools.add_parser("check", help="admission on the workspace, exactly as the step will run it")
    trial_parser = tools.add_parser("trial", help="run the scenario's agent on the workspace's harness")
    trial_parser.add_argument("prompt")
    trial_parser.add_argument("--expect", help="a regular expression the final answer should match")
    trial_parser.add_argument("--workspace", help="a folder of the workspace copied in as the trial's project")
    notes_parser = tools.add_parser("notes", help="keep working notes with the step")
    notes_parser.add_argument("text")
    parsed = parser.parse_args(args)
    facts = state()
    if parsed.tool == "check":
        return check(facts)
    if parsed.tool == "trial":
        return trial(facts, parsed.prompt, parsed.expect, parsed.workspace)
    return notes(facts, parsed.text)
