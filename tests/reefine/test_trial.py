"""The pre-publish trial run: the real agent starts on the candidate and answers one health prompt through reef."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from reef_contract import TRIAL_SCENARIO
from reef_daemon.harness.jail import JAIL_PORT
from tests.support.cli_testing import clean_env, run_reef
from tests.support.fake_proposer_model import answer, plan, skill
from tests.support.fixtures import FindAgent
from tests.support.reefine_testing import SCENARIO, StartReefine
from tests.support.waiting import eventually

TOKEN = "trial-test-token-0123456789"


def config(entry_id: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"id": entry_id, "kind": "config", "config": {"data": data}}


async def step_metrics(reefine: Any) -> dict[str, Any]:
    rows = await reefine.releases()
    metrics: dict[str, Any] = rows[0]["metrics"]
    return metrics


def fake_agent(path: Path, script: str) -> Path:
    """An executable sh script standing in for the agent."""
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return path


async def request_a_skill(reefine: Any, text: str = "make answers brief") -> dict[str, Any]:
    """File a request the scripted model answers with one skill; its settled progress."""
    reefine.model.script("answer", answer("Answer briefly.\n\nHow to use: just ask.", skill("brief")))
    progress: dict[str, Any] = await reefine.settled(await reefine.train(text))
    return progress


async def last_trial(reefine: Any) -> dict[str, Any]:
    """The newest step's trial, as its metrics keep it."""
    trial: dict[str, Any] = (await step_metrics(reefine))["check"]["trial"]
    return trial


async def test_pi_starts_on_the_candidate_and_answers_before_it_is_published(
    start_reefine: StartReefine, agent_cli: FindAgent
) -> None:
    pi = agent_cli("pi")
    reefine = await start_reefine(harness__trial=str(pi), reef__token=TOKEN)
    progress = await request_a_skill(reefine)

    assert progress["result"] == "selected", progress
    texts = [line["text"] for line in progress["activity"]]
    said = next(text for text in texts if text.startswith("trial: pi started on it and answered"))
    assert "in the evaluation gate's run of the behaviour check, which stands in for the health prompt" in said
    assert texts.index(said) < texts.index("published")
    trial = await last_trial(reefine)
    assert trial["ran"] and trial["passed"] and trial["exit_code"] == 0 and "Paris" in trial["answer"]
    assert trial["stood_in"] == "behaviour"
    assert (await reefine.ok("GET", "/reef/status"))["recipe"]["trial"] == f"{pi}, in a bubblewrap jail"

    # The gate ran pi on the candidate, so no separate health prompt ran: two runs (the behaviour check on the
    # served version and on the candidate), one model call each, all through reef under its own scenario.
    assert not any(text.startswith("trial: starting") for text in texts)
    status, listed = await reefine.call("GET", f"/reef/records?scenario={TRIAL_SCENARIO}&type=inference")
    assert status == 200
    tried = [(await reefine.call("GET", f"/reef/records/{row['id']}"))[1] for row in listed["records"]]
    assert sorted(row["tags"]["version"] for row in tried) == sorted(["candidate", progress["evidence"]["served"]])
    assert not [row for row in tried if "reef-ok" in str(row["request"])]


async def test_the_health_prompt_runs_where_the_gate_ran_nothing_on_the_candidate(
    start_reefine: StartReefine, agent_cli: FindAgent
) -> None:
    pi = agent_cli("pi")
    # A step from a low score answers no request (no behaviour check), and with no replays there is no task.
    reefine = await start_reefine(harness__trial=str(pi), harness__replays="0", reef__token=TOKEN)
    await reefine.ok("POST", f"/reef/scenarios/{SCENARIO}/update", {"training_mode": "hybrid"})
    chat = {"model": "fake-proposer", "messages": [{"role": "user", "content": "capital of France?"}]}
    async with reefine.session.post(
        reefine.url + "/v1/chat/completions",
        json=chat,
        headers={**reefine.headers(), "Authorization": f"Bearer {TOKEN}"},
    ) as sent:
        receipt = sent.headers["x-reef-agent-record-id"]
    reefine.model.script("failure-skill", json.dumps(skill("answer-fully", "# Answer fully\nGive the reason too.")))
    await reefine.ok("POST", "/reef/report", {"score": 0.1, "references": [receipt]})
    rows = await eventually(reefine.releases, 120, "the low score's step", satisfied=lambda rows: len(rows) > 1)

    assert rows[0]["result"] == "selected", rows[0]
    evidence, trial = rows[0]["metrics"]["evidence"], rows[0]["metrics"]["check"]["trial"]
    assert evidence["ran"] and evidence["rows"] == []
    assert trial["passed"] and trial["stood_in"] is None and trial["reason"].startswith("pi started on it")

    # The health prompt went through reef with a token lent for model calls only, under its own scenario.
    status, listed = await reefine.call("GET", f"/reef/records?scenario={TRIAL_SCENARIO}&type=inference")
    assert status == 200 and listed["records"], listed
    tried = [(await reefine.call("GET", f"/reef/records/{row['id']}"))[1] for row in listed["records"]]
    record = next(row for row in tried if row["tags"]["release"] == f"candidate-for-{SCENARIO}")
    assert "reef-ok" in str(record["request"])
    status, mine = await reefine.call("GET", f"/reef/records?scenario={SCENARIO}&type=inference")
    assert [row["id"] for row in mine["records"]] == [receipt]  # the person's conversation, nothing of the trial
    # Nor is a health prompt work for the person: unscored lists leave it out unless reef-trials is asked for.
    status, to_score = await reefine.call("GET", "/reef/records?unscored=true")
    assert record["id"] not in [row["id"] for row in to_score["records"]]
    status, asked = await reefine.call("GET", f"/reef/records?unscored=true&scenario={TRIAL_SCENARIO}")
    assert record["id"] in [row["id"] for row in asked["records"]]


async def test_a_candidate_the_agent_cannot_start_on_is_rejected_and_the_served_one_still_serves(
    start_reefine: StartReefine, agent_cli: FindAgent
) -> None:
    codex = agent_cli("codex")
    reefine = await start_reefine(harness__adapter="codex", harness__trial=str(codex))
    # codex refuses to load a config.toml whose value has the wrong type.
    reefine.model.script(
        "answer", answer("Hide reasoning.\n\nHow to use: ask.", config("quiet", {"hide_agent_reasoning": "yes"}))
    )
    progress = await reefine.settled(await reefine.train("hide the reasoning"))

    assert progress["result"] == "rejected" and progress["release"] is None
    assert progress["reason"].startswith("the candidate failed its trial run, the served harness did not: codex exited")
    assert "expected a boolean" in progress["reason"]
    check = (await step_metrics(reefine))["check"]
    assert not check["trial"]["passed"] and check["served_trial"]["passed"]
    harness = await reefine.ok("GET", "/reef/harness")
    assert harness["version"] == "v0"


async def test_when_the_served_harness_fails_too_the_step_is_skipped_not_blamed_on_the_candidate(
    start_reefine: StartReefine, tmp_path: Path
) -> None:
    broken = fake_agent(tmp_path / "agent-that-never-starts", "echo 'cannot reach the display' >&2\nexit 7\n")
    reefine = await start_reefine(harness__trial=str(broken))
    progress = await request_a_skill(reefine)

    assert progress["result"] == "skipped", progress
    assert progress["reason"] == (
        "the trial could not judge the candidate: the served harness fails too "
        "(pi exited with status 7: cannot reach the display)"
    )


async def test_a_trial_is_not_run_without_the_agent(
    start_reefine: StartReefine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"  # a host with git (for releases) and no pi
    bin_dir.mkdir()
    git = shutil.which("git")
    assert git is not None
    (bin_dir / "git").symlink_to(git)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr("adapters._locate.setup_folders", lambda: [tmp_path / "tools"])
    reefine = await start_reefine(harness__trial="auto")
    progress = await request_a_skill(reefine)
    assert progress["result"] == "selected"
    trial = await last_trial(reefine)
    assert trial["reason"] == (
        f"not run: pi is not installed: reef looked on PATH and in {tmp_path / 'tools'}; install it "
        "(npm install -g @mariozechner/pi-coding-agent) or run scripts/setup"
    )
    assert not trial["ran"] and trial["exit_code"] is None
    status = await reefine.ok("GET", "/reef/status")
    assert status["recipe"]["trial"] == trial["reason"]


def extension(code: str) -> dict[str, Any]:
    return {"id": "notify", "kind": "extension", "config": {"name": "notify", "code": code}}


async def test_an_extension_change_is_tried_in_the_jail_and_a_broken_one_never_reaches_review(
    start_reefine: StartReefine, agent_cli: FindAgent
) -> None:
    pi = agent_cli("pi")
    reefine = await start_reefine(harness__trial=str(pi))
    reefine.model.script("answer", answer("Notify.\n\nHow to use: wait.", extension("export default () => {}\n")))
    progress = await reefine.settled(await reefine.train("notify me when done"))
    assert progress["result"] == "pending"
    assert (await last_trial(reefine))["passed"]

    reefine.model.script("answer", answer("Notify.\n\nHow to use: wait.", extension("export default (;\n")))
    progress = await reefine.settled(await reefine.train("notify me when done, again"))
    assert progress["result"] == "rejected" and progress["release"] is None
    assert 'Failed to load extension "' in progress["reason"] and "notify.ts" in progress["reason"]


async def test_without_the_jail_extension_code_is_not_run_before_review(
    start_reefine: StartReefine, tmp_path: Path
) -> None:
    never = fake_agent(tmp_path / "agent-that-must-not-start", "exit 9\n")
    reefine = await start_reefine(harness__trial=str(never), harness__sandbox="none")
    reefine.model.script("answer", answer("Notify.\n\nHow to use: wait.", extension("export default () => {}\n")))
    progress = await reefine.settled(await reefine.train("notify me when done"))
    assert progress["result"] == "pending"
    assert (await last_trial(reefine))["reason"] == (
        "not run: it changes an extension, and without a jail (harness.sandbox = none) model-written code runs only "
        "once a person promotes it"
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("pi", "reef serve: harness.trial: 'pi' is not off, auto or an absolute path to the agent's binary"),
        ("/no/such/pi", "reef serve: harness.trial: /no/such/pi is not an executable file"),
    ],
)
def test_a_bad_trial_setting_stops_the_daemon_with_what_to_fix(tmp_path: Path, value: str, message: str) -> None:
    served = run_reef(
        tmp_path, clean_env(), "serve", "--recipe", "reefine", "--harness.trial", value, "--reef.port", "0"
    )
    assert served.returncode == 2 and served.stderr.strip() == message


def test_a_bad_sandbox_setting_stops_the_daemon_with_what_to_fix(tmp_path: Path) -> None:
    served = run_reef(tmp_path, clean_env(REEF_PROPOSER_SANDBOX="docker"), "serve", "--recipe", "reefine")
    assert served.returncode == 2
    assert served.stderr.strip() == "reef serve: harness.sandbox: 'docker' is not bwrap or none"


@pytest.mark.parametrize("adapter", ["codex", "dsh"])
async def test_codex_and_dsh_start_on_the_candidate_and_answer(
    start_reefine: StartReefine, adapter: str, agent_cli: FindAgent
) -> None:
    binary = agent_cli(adapter)
    reefine = await start_reefine(harness__adapter=adapter, harness__trial=str(binary))
    progress = await request_a_skill(reefine)

    assert progress["result"] == "selected", progress
    trial = await last_trial(reefine)
    assert trial["passed"] and "Paris" in trial["answer"], trial
    assert any(line["text"].startswith(f"trial: {adapter} started on it") for line in progress["activity"])


async def test_an_agent_that_never_answers_is_stopped_with_everything_it_started(
    start_reefine: StartReefine, tmp_path: Path
) -> None:
    marker = str(300 + os.getpid() % 600)  # `sleep <marker>` names the agent's children among this host's processes
    hanging = fake_agent(tmp_path / "agent-that-hangs", f"sleep {marker} &\nwait\n")
    reefine = await start_reefine(harness__trial=str(hanging), harness__trial_timeout_s="1")
    progress = await request_a_skill(reefine)

    assert progress["result"] == "skipped"
    assert progress["reason"].endswith("(pi did not answer within 1 s)")
    assert not [pid for pid in _processes_running(["sleep", marker])], "the agent's children outlived its trial"


def _processes_running(argv: list[str]) -> list[int]:
    wanted = "\0".join(argv).encode()
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if (proc / "cmdline").read_bytes().rstrip(b"\0") == wanted:
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


async def test_a_jailed_agent_cannot_read_the_home_write_outside_its_root_or_reach_the_network(
    start_reefine: StartReefine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("private key\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("REEF_TEST_SECRET", "from-the-daemon's-environment")
    outside = tmp_path / "outside"
    outside.mkdir()
    agents = tmp_path / "agents"  # beside the home, not above it
    agents.mkdir()
    probe = fake_agent(
        agents / "agent-that-probes",
        f"[ -e {home}/.ssh/id_ed25519 ] && h=home:visible || h=home:hidden\n"
        f"touch {outside}/written 2>/dev/null && w=write:allowed || w=write:refused\n"
        f"{sys.executable} -c \"import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 2)\" "
        '"$REEF_DAEMON_PORT" 2>/dev/null && n=net:reached || n=net:refused\n'
        'echo "$h $w env:${REEF_TEST_SECRET:-clean} $n"\n',
    )
    reefine = await start_reefine(harness__trial=str(probe))
    monkeypatch.setenv("REEF_DAEMON_PORT", str(reefine.server.port))  # even told where, it cannot get there
    reefine.model.script("plan", plan({"prompt": "probe", "regex": "home:hidden"}))  # what this agent says
    progress = await request_a_skill(reefine)

    trial = await last_trial(reefine)
    assert trial["ran"] and trial["answer"] == "home:hidden write:refused env:clean net:refused", trial
    assert progress["result"] == "selected"
    assert not (outside / "written").exists()
    said = "\n".join(line["text"] for line in progress["activity"])
    assert "trial: pi started on it" in said


PROBE_CALLS = f"""
import json, os, urllib.error, urllib.request

def call(method, path, body=None, scenario=None):
    headers = {{"Authorization": "Bearer " + os.environ["REEF_TOKEN"], "Content-Type": "application/json"}}
    if scenario is not None:
        headers["x-reef-scenario"] = scenario
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request("http://127.0.0.1:{JAIL_PORT}" + path, data, headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status
    except urllib.error.HTTPError as refused:
        return refused.code

chat = {{"model": "m", "messages": [{{"role": "user", "content": "sent from the jail"}}]}}
print(
    call("GET", "/reef/records?scenario={SCENARIO}", scenario="{SCENARIO}"),
    call("POST", "/reef/scenarios", {{"name": "made-in-the-jail"}}, scenario="{SCENARIO}"),
    call("POST", "/reef/report", {{"score": -100}}, scenario="{SCENARIO}"),
    call("POST", "/v1/chat/completions", chat, scenario="{SCENARIO}"),
    call("POST", "/v1/chat/completions", chat, scenario="{TRIAL_SCENARIO}"),
    call("POST", "/v1/chat/completions", chat),
)
"""


@pytest.mark.parametrize("token", [None, TOKEN], ids=["auth-off", "auth-on"])
async def test_a_jailed_agent_reaches_only_its_own_model_calls_whatever_the_auth_setting(
    start_reefine: StartReefine, tmp_path: Path, token: str | None
) -> None:
    (tmp_path / "probe.py").write_text(PROBE_CALLS)
    probe = fake_agent(tmp_path / "agent-that-calls-the-daemon", f"exec {sys.executable} {tmp_path / 'probe.py'}\n")
    reefine = await start_reefine(harness__trial=str(probe), reef__token=token)
    await request_a_skill(reefine)

    trial = await last_trial(reefine)
    # Records, scenarios, reports and another scenario's model calls are refused; its own model calls go through.
    assert trial["answer"] == "404 404 404 403 200 200", trial
    scenarios = await reefine.ok("GET", "/reef/scenarios")
    assert "made-in-the-jail" not in [row["scenario"] for row in scenarios["scenarios"]]
    mine = await reefine.ok("GET", f"/reef/records?scenario={SCENARIO}")
    assert [row["type"] for row in mine["records"]] == ["request"]  # the person's change request, nothing else
    trials = await reefine.ok("GET", f"/reef/records?scenario={TRIAL_SCENARIO}&type=inference")
    tried = [await reefine.ok("GET", f"/reef/records/{row['id']}") for row in trials["records"]]
    # The gate's run of the behaviour check on the candidate stood in for the health prompt: its two calls.
    assert len([row for row in tried if row["tags"].get("version") == "candidate"]) == 2


async def test_without_bubblewrap_trials_say_how_to_get_it_or_run_unjailed(
    start_reefine: StartReefine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agent_cli: FindAgent
) -> None:
    pi = agent_cli("pi")
    bin_dir = tmp_path / "bin"  # git and node, no bwrap
    bin_dir.mkdir()
    for tool in ("git", "node"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(bin_dir))
    reefine = await start_reefine(harness__trial=str(pi))
    await request_a_skill(reefine)
    trial = await last_trial(reefine)
    assert trial["reason"] == (
        "not run: bubblewrap is not installed on this host (apt-get install bubblewrap); set "
        "REEF_PROPOSER_SANDBOX=none to run trials without a jail on a trusted machine"
    )
    assert (await reefine.ok("GET", "/reef/status"))["recipe"]["trial"] == trial["reason"]


async def test_with_the_sandbox_off_the_agent_runs_as_a_plain_child(
    start_reefine: StartReefine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = fake_agent(tmp_path / "agent-that-looks-around", 'echo "env:${REEF_TEST_SECRET:-clean}"\n')
    monkeypatch.setenv("REEF_TEST_SECRET", "from-the-daemon's-environment")
    reefine = await start_reefine(harness__trial=str(probe), harness__sandbox="none")
    await request_a_skill(reefine)
    trial = await last_trial(reefine)
    assert trial["passed"] and trial["answer"] == "env:clean"  # still a minimal environment, only no jail
    status = await reefine.ok("GET", "/reef/status")
    assert status["recipe"]["trial"] == f"{probe}, WITHOUT a jail (harness.sandbox = none)"


async def test_a_service_account_home_of_slash_does_not_blind_the_jail(
    start_reefine: StartReefine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = fake_agent(tmp_path / "agent-that-answers", "echo reef-ok\n")
    monkeypatch.setenv("HOME", "/")
    reefine = await start_reefine(harness__trial=str(agent))
    await request_a_skill(reefine)
    trial = await last_trial(reefine)
    assert trial["passed"] and trial["answer"] == "reef-ok", trial


# A config each agent cannot start on: Claude Code ignores a settings file it finds invalid (and, in a trial, then
# has no way to reef); opencode refuses an invalid config.
BROKEN_CONFIG = {
    "claude": {"permissions": {"defaultMode": "nonsense"}},
    "opencode": {"agent": {"build": {"temperature": "hot"}}},
}


@pytest.mark.parametrize("adapter", list(BROKEN_CONFIG))
async def test_claude_and_opencode_answer_in_the_jail_and_a_broken_candidate_is_rejected(
    start_reefine: StartReefine, adapter: str, agent_cli: FindAgent
) -> None:
    binary = agent_cli(adapter)
    reefine = await start_reefine(harness__adapter=adapter, harness__trial=str(binary), reef__token=TOKEN)
    progress = await request_a_skill(reefine)
    assert progress["result"] == "selected", progress
    trial = await last_trial(reefine)
    assert trial["passed"] and "Paris" in trial["answer"], trial
    assert any(line["text"].startswith(f"trial: {adapter} started on it") for line in progress["activity"])
    status, listed = await reefine.call("GET", f"/reef/records?scenario={TRIAL_SCENARIO}&type=inference")
    assert status == 200 and listed["records"], listed

    reefine.model.script("answer", answer("Careful.\n\nHow to use: ask.", config("broken", BROKEN_CONFIG[adapter])))
    progress = await reefine.settled(await reefine.train("be careful"))
    assert progress["result"] == "rejected" and progress["release"] is None, progress
    assert progress["reason"].startswith(f"the candidate failed its trial run, the served harness did not: {adapter}")
    assert (await reefine.ok("GET", "/reef/harness"))["version"] == "v1"
