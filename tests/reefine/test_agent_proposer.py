"""The agent proposer: a scripted model drives the real pi in the jail through a whole session; the workspace it
leaves is read back, admitted, reviewed and published, and the request's progress shows what it did."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from reef_contract import TRIAL_SCENARIO
from tests.support.fixtures import FindAgent
from tests.support.reefine_testing import AGENT_SETTLES_S, SCENARIO, StartReefine, activity

BAD_SKILL = "printf '# Be brief\\nAnswer in one sentence.\\n' > 'skills/be brief!.md'"
FIX_SKILL = (
    "mv 'skills/be brief!.md' skills/brief.md && printf 'A brief skill.\\n\\nHow to use: just ask.' > design.md"
    " && harness-check"
)
TRIAL = "harness-trial 'What is the capital of France?' --expect Paris"
TOKEN = "agent-proposer-test-token-0123456789"
EDIT_RESERVED = "echo '// changed' >> reserved/extensions/reef-requests.ts"


def probe(state: Path, port: int) -> str:
    """A shell probe: how many files of the daemon's state it sees; a word for each escape that worked."""
    return (
        f"ls -A {state} 2>/dev/null | wc -l; touch /var/tmp/reef-probe-{port} 2>/dev/null && echo WROTE-OUTSIDE; "
        f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo REACHED-DAEMON; true"
    )


async def test_pi_edits_checks_and_tries_the_harness_in_the_jail_and_it_is_published(
    start_reefine: StartReefine, pi: Path, tmp_path: Path
) -> None:
    reefine = await start_reefine(harness__proposer_agent="pi", reef__token=TOKEN)  # the agent gets a lent token
    assert reefine.agent is not None
    chat = {"model": "fake-proposer", "messages": [{"role": "user", "content": "what is the capital of Peru?"}]}
    headers = {**reefine.headers(), "Authorization": f"Bearer {TOKEN}"}
    async with reefine.session.post(reefine.url + "/v1/chat/completions", json=chat, headers=headers) as sent:
        receipt = sent.headers["x-reef-agent-record-id"]
    await reefine.ok("POST", "/reef/report", {"score": 0.1, "references": [receipt]})
    reefine.agent.commands = [
        "cat context/request.md context/conversations.md", BAD_SKILL, "harness-check", FIX_SKILL, TRIAL, EDIT_RESERVED,
        "harness-notes 'a skill is enough: the request is about wording'", f"env | grep -c {TOKEN} || true",
        probe(tmp_path / "state", int(reefine.url.rsplit(":", 1)[1])),
    ]  # fmt: skip

    progress = await reefine.settled(await reefine.train("make answers brief"), AGENT_SETTLES_S)

    assert progress["result"] == "selected", activity(progress)
    lines = activity(progress)
    assert any(line.startswith("proposer: the agent proposer: pi") and "jail" in line for line in lines), lines
    # What the agent's tools printed came back to it: the refusal, then the admitted fix, then the trial.
    context, refusal, admitted, tried, reserved = [reefine.agent.results[0], *reefine.agent.results[2:6]]
    assert "make answers brief" in context and "[user]\nwhat is the capital of Peru?" in context
    assert "score: 0.1" in context and "[answer]\nThe capital of France is Paris." in context
    assert "refused: entry id 'be brief!' is not allowed" in refusal
    assert admitted.startswith("admitted:")
    assert "The capital of France is Paris." in tried and "expect /Paris/: matched" in tried
    assert "Read-only file system" in reserved  # the jail keeps reef's own entries as they are
    assert reefine.agent.results[7].strip() == "0"  # the daemon's token never reaches the agent; a lent one does
    assert reefine.agent.results[8].split() == ["0"]  # no state, no writes outside, no daemon port
    # The progress lists each tool call, check and trial, in order.
    assert any(line.startswith("agent: bash") and "cat context/request.md" in line for line in lines)
    assert any(line.startswith("harness-check: refused") for line in lines)
    assert any(line.startswith("harness-check: admitted") for line in lines)
    assert any(line.startswith("harness-trial: expect matched") for line in lines)
    assert lines.index(next(line for line in lines if line.startswith("harness-trial"))) < lines.index("published")

    release = (await reefine.releases())[0]
    metrics = release["metrics"]
    assert [m["id"] for m in metrics["mutations"]] == ["brief"]
    assert metrics["mutations"][0]["config"]["text"] == "# Be brief\nAnswer in one sentence.\n"
    assert metrics["agent"]["trials"][0]["matched"] is True
    assert metrics["agent"]["trials"][0]["prompt"] == "What is the capital of France?"
    assert metrics["agent"]["notes"] == "a skill is enough: the request is about wording\n"
    assert "harness-notes: a skill is enough: the request is about wording" in lines
    # The agent's own session log, read as a transcript and kept bounded.
    transcript = metrics["agent"]["transcript"]
    assert '[tool call] bash {"command": "harness-check"}' in transcript
    assert "[tool result] refused: entry id 'be brief!' is not allowed" in transcript
    assert transcript.endswith("[assistant] Done: the change is in the workspace.")
    assert metrics["agent"]["model_calls"] >= 10  # nine turns of the agent and the trial's own
    assert progress["how_to_use"] == "just ask."
    status = await reefine.ok("GET", "/reef/status")
    assert "200 model calls" in status["recipe"]["proposer"] and "10 trials" in status["recipe"]["proposer"]

    # The trial's model call went through reef, tagged with the request.
    listed = await reefine.ok("GET", f"/reef/records?scenario={TRIAL_SCENARIO}&type=inference")
    releases = set()
    for row in listed["records"]:
        record = await reefine.ok("GET", f"/reef/records/{row['id']}")
        releases.add(record["tags"]["release"])
    assert f"trial-for-{progress['id']}" in releases and f"proposer-for-{progress['id']}" in releases
    assert SCENARIO not in releases


async def test_without_a_jail_an_edit_under_reserved_is_reported_and_not_applied(
    start_reefine: StartReefine, pi: Path
) -> None:
    reefine = await start_reefine(harness__proposer_agent="pi", harness__sandbox="none", reef__token=TOKEN)
    assert reefine.agent is not None
    reefine.agent.commands = [
        "chmod u+w reserved/extensions/reef-requests.ts && " + EDIT_RESERVED,
        "printf '# Be brief\\nAnswer in one sentence.' > skills/brief.md",
        direct_model_call(reefine.url),
    ]

    progress = await reefine.settled(await reefine.train("make answers brief"), AGENT_SETTLES_S)

    # Without a jail the daemon's port is in reach, but the agent holds no token it would take: its relay, which
    # counts the run's model calls, presents the lent one.
    assert reefine.agent.results[2].strip() == "401"
    lines = activity(progress)
    assert any("WITHOUT a jail" in line for line in lines if line.startswith("proposer: the agent proposer"))
    assert (
        "not applied: reserved/extensions/reef-requests.ts: reef's own entries cannot be changed; the edit was "
        "not applied" in lines
    )
    assert progress["result"] == "pending" or progress["result"] == "selected", lines
    metrics = (await reefine.releases())[0]["metrics"]
    assert [m["id"] for m in metrics["mutations"]] == ["brief"]
    assert metrics["agent"]["reported"] == [
        "reserved/extensions/reef-requests.ts: reef's own entries cannot be changed; the edit was not applied"
    ]


def direct_model_call(url: str) -> str:
    """A shell command: the HTTP status of a model call straight to the daemon with the token in the agent's env."""
    body = '{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    return (
        f"curl -s -o /dev/null -w '%{{http_code}}' -H \"Authorization: Bearer $REEF_TOKEN\" "
        f"-H 'x-reef-scenario: {TRIAL_SCENARIO}' -H 'Content-Type: application/json' -d '{body}' "
        f"{url}/v1/chat/completions"
    )


def only_git(folder: Path) -> str:
    """A PATH folder with git alone (the daemon's releases need it)."""
    folder.mkdir()
    git = shutil.which("git")
    assert git is not None
    (folder / "git").symlink_to(git)
    return str(folder)


async def test_without_the_agent_the_text_proposer_answers_and_says_why(
    start_reefine: StartReefine, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    reefine = await start_reefine(harness__proposer_agent="codex")
    monkeypatch.setenv("PATH", only_git(tmp_path / "bin"))
    monkeypatch.setattr("adapters._locate.setup_folders", lambda: [tmp_path / "tools"])
    progress = await reefine.settled(await reefine.train("make answers brief"))
    why = f"codex is not installed: reef looked on PATH and in {tmp_path / 'tools'}; install it"
    assert activity(progress)[1].startswith(f"proposer: the text proposer: {why}")
    assert reefine.model.seen("plan")  # the text proposer asked for a plan


async def test_without_the_jail_the_text_proposer_answers_and_says_why(
    start_reefine: StartReefine, pi: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    reefine = await start_reefine(harness__proposer_agent="pi")
    monkeypatch.setenv("PATH", os.pathsep.join([only_git(tmp_path / "bin"), str(pi.parent)]))  # no bubblewrap
    progress = await reefine.settled(await reefine.train("make answers brief"))
    assert activity(progress)[1].startswith("proposer: the text proposer: bubblewrap is not installed on this host")
    assert reefine.model.seen("plan")


async def test_the_agent_is_found_where_set_up_installs_it(
    start_reefine: StartReefine, pi: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """pi off PATH, in a set-up folder: found (as `reef status` and the wrappers find it); here only the jail is
    missing."""
    reefine = await start_reefine(harness__proposer_agent="pi")
    monkeypatch.setenv("PATH", only_git(tmp_path / "bin"))
    monkeypatch.setattr("adapters._locate.setup_folders", lambda: [pi.parent])
    progress = await reefine.settled(await reefine.train("make answers brief"))
    assert activity(progress)[1].startswith("proposer: the text proposer: bubblewrap is not installed on this host")


async def test_codex_proposes_for_a_codex_harness(
    start_reefine: StartReefine, monkeypatch: pytest.MonkeyPatch, agent_cli: FindAgent
) -> None:
    codex = agent_cli("codex")
    monkeypatch.setenv("PATH", os.pathsep.join([str(codex.parent), os.environ["PATH"]]))
    reefine = await start_reefine(harness__adapter="codex", harness__proposer_agent="codex")
    assert reefine.agent is not None
    reefine.agent.commands = ["cat context/request.md", BAD_SKILL, "harness-check", FIX_SKILL, TRIAL]

    progress = await reefine.settled(await reefine.train("make answers brief"), AGENT_SETTLES_S)

    lines = activity(progress)
    assert progress["result"] == "selected", (lines, reefine.agent.results)
    assert any(line.startswith("proposer: the agent proposer: codex") for line in lines), lines
    refusal, admitted, tried = reefine.agent.results[2:5]
    assert "refused: entry id 'be brief!' is not allowed" in refusal
    assert "admitted:" in admitted
    assert "expect /Paris/: matched" in tried
    assert any(line.startswith("harness-trial: expect matched") for line in lines)
    assert any(line.startswith('agent: exec_command {"cmd": "cat context/request.md"') for line in lines), lines
    metrics = (await reefine.releases())[0]["metrics"]
    assert [m["id"] for m in metrics["mutations"]] == ["brief"]
    # codex's rollout log, read as a transcript: its calls, what they printed, its last word.
    transcript = metrics["agent"]["transcript"]
    assert '[tool call] exec_command {"cmd": "harness-check"' in transcript
    assert "refused: entry id 'be brief!' is not allowed" in transcript
    assert "[tool result] " in transcript and "expect /Paris/: matched" in transcript
    assert transcript.endswith("[assistant] Done: the change is in the workspace.")
