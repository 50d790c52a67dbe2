"""`reef-<agent> good|bad [words]` inside a session scores that session's last answer as a person would with the
TUI's keys. A stand-in agent asks through reef, then thumbs the answer down the way an in-agent command runs it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import httpx
import pytest

from adapters._reef_commands import reef_commands
from reef_daemon.harness.admission import RESERVED_IDS
from tests.support.adapters_testing import Reefine

AGENT = """#!{python}
import json, os, subprocess, urllib.request
def ask(text):
    body = json.dumps({{"model": "m", "messages": [{{"role": "user", "content": text}}]}}).encode()
    request = urllib.request.Request(os.environ["REEF_SERVICE_URL"] + "/v1/chat/completions", data=body, headers={{
        "content-type": "application/json", "x-reef-scenario": os.environ["REEF_SCENARIO"],
        "x-reef-tag-session": os.environ["REEF_HARNESS_SESSION"],
        "authorization": "Bearer " + os.environ.get("REEF_TOKEN", "none")}})
    urllib.request.urlopen(request, timeout=60).read()
for text in {asks}:
    ask(text)
thumbed = subprocess.run([os.environ["REEF_HARNESS_WRAPPER"], "bad", "wrong file"], capture_output=True, text=True)
open({out!r}, "w").write(json.dumps([thumbed.returncode, thumbed.stdout, thumbed.stderr]))
"""


def run_session(reefine: Reefine, asks: list[str]) -> tuple[int, str, str]:
    out = reefine.home / "thumbed.json"
    agent = reefine.home / "agent.py"
    agent.write_text(AGENT.format(python=sys.executable, asks=asks, out=str(out)))
    agent.chmod(0o755)
    ran = reefine.wrapper("pi", REEF_HARNESS_BINARY=str(agent))
    assert ran.returncode == 0, ran.stderr
    code, stdout, stderr = json.loads(out.read_text())
    return code, stdout, stderr


def session_records(reefine: Reefine) -> list[dict[str, Any]]:
    """The session's model calls in full, oldest first."""
    rows = reefine.call("GET", "/reef/records?type=inference")["records"]
    records = [reefine.call("GET", f"/reef/records/{row['id']}") for row in rows]
    return sorted((r for r in records if r["tags"].get("session")), key=lambda r: r["sequence"])


def test_bad_in_a_session_scores_its_last_answer_low_with_the_words(reefine: Reefine) -> None:
    assert reefine.install("pi").returncode == 0
    code, stdout, stderr = run_session(reefine, ["open the config", "fix the login"])
    assert code == 0, stderr
    earlier, newest = session_records(reefine)
    assert newest["id"] in stdout
    (report,) = newest["reports"]
    scale = reefine.call("GET", "/reef/status")["score_scale"]
    assert (report["source"], report["score"], report["feedback"]) == ("person", scale["min"], "wrong file")
    assert earlier["reports"] == []


def test_the_calls_the_model_made_for_the_command_are_not_what_it_scores(reefine: Reefine) -> None:
    """In codex and dsh the session's model reads `$bad ...` and runs the wrapper itself: its call for that is the
    newest, but the answer the person meant is the one before their command."""
    assert reefine.install("pi").returncode == 0
    code, stdout, stderr = run_session(reefine, ["fix the login", "$bad wrong file"])
    assert code == 0, stderr
    meant, for_the_command = session_records(reefine)
    assert meant["id"] in stdout
    assert [report["feedback"] for report in meant["reports"]] == ["wrong file"]
    assert for_the_command["reports"] == []


def test_thumbs_before_any_answer_says_there_is_none(reefine: Reefine) -> None:
    assert reefine.install("pi").returncode == 0
    code, _, stderr = run_session(reefine, [])
    assert code == 1 and "no answer in this session yet" in stderr


# Where each agent's own /good and /bad command files are installed.
SHELL_COMMANDS = {"claude": "claude/commands/{name}.md", "opencode": "opencode/config/opencode/command/{name}.md"}
SHELL_LINE = re.compile(r"^!`(?P<line>.+)`$", re.MULTILINE)


def sessions_answer(reefine: Reefine, session: str) -> str:
    """An answer given in `session` (as the agent's model call would be tagged); its receipt."""
    body = {"model": "m", "messages": [{"role": "user", "content": "where is the login handled?"}]}
    headers = {**reefine.headers(), "x-reef-tag-session": session}
    response = httpx.post(reefine.url + "/v1/chat/completions", json=body, headers=headers, timeout=60)
    assert response.status_code == 200, response.text
    return response.headers["x-reef-agent-record-id"]


@pytest.mark.parametrize("adapter", list(SHELL_COMMANDS))
@pytest.mark.parametrize("verdict", ["good", "bad"])
def test_the_agents_own_good_and_bad_commands_score_the_sessions_last_answer(
    reefine: Reefine, adapter: str, verdict: str
) -> None:
    """Claude Code and opencode run a command file's `` !`line` `` in the session's environment (the wrapper's
    session id) and show its output: run as the agent would, `/bad wrong file` scores the session's last answer."""
    assert reefine.install(adapter).returncode == 0
    command = (reefine.root(adapter) / SHELL_COMMANDS[adapter].format(name=verdict)).read_text()
    found = SHELL_LINE.search(command)
    assert found is not None, command
    receipt = sessions_answer(reefine, "session-thumbs")
    environment = {**reefine.env, "REEF_HARNESS_SESSION": "session-thumbs", "ARGUMENTS": "wrong file"}
    environment["PATH"] = f"{reefine.home / '.local' / 'bin'}:{environment.get('PATH', '/usr/bin:/bin')}"
    ran = subprocess.run(["bash", "-c", found["line"]], env=environment, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert receipt in ran.stdout
    (report,) = reefine.call("GET", f"/reef/records/{receipt}")["reports"]
    scale = reefine.call("GET", "/reef/status")["score_scale"]
    score = scale["max"] if verdict == "good" else scale["min"]
    assert (report["source"], report["score"], report["feedback"]) == ("person", score, "wrong file")


@pytest.mark.parametrize(("adapter", "typed"), [("codex", "$bad"), ("dsh", "/bad")])
def test_codex_and_dsh_get_good_and_bad_as_commands_that_drive_the_wrapper(adapter: str, typed: str) -> None:
    entries = {entry.id: entry for entry in reef_commands(adapter, typed[0])}
    assert {"good", "bad"} <= set(entries) <= RESERVED_IDS | {"reefine", "versions"}
    text = str(entries["bad"].config["text"])
    assert f"# Score this session's last answer bad: {typed}" in text
    assert '"$REEF_HARNESS_WRAPPER" bad "<their words>"' in text


def test_no_proposal_may_take_the_good_and_bad_names() -> None:
    assert {"good", "bad"} <= RESERVED_IDS
