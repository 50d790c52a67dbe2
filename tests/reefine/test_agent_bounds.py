"""The agent proposer's bounds hold whatever runs in the jail: the daemon stops the agent at the wall bound with its
children, counts its model calls and its trials, and stops a trial at its time bound, even for code in the
workspace that asks the daemon directly instead of through the tool commands."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.support.reefine_testing import AGENT_SETTLES_S, StartReefine, activity, processes_with
from tests.support.waiting import eventually

WRITE_SKILL = "printf '# Be brief\\nAnswer in one sentence.' > skills/brief.md"
# Code in the workspace that asks the daemon's trial tool itself, as the command would, three times.
DIRECT_TRIALS = (
    'for prompt in one two three; do curl -s -X POST -H "Authorization: Bearer $REEF_STEP_TOKEN" '
    '-H \'Content-Type: application/json\' -d "{\\"prompt\\": \\"$prompt\\"}" "$REEF_STEP_URL/reef-step/trial"; '
    "echo; done"
)
FORGED_TOKEN = (
    'curl -s -X POST -H \'Authorization: Bearer forged\' -d \'{"prompt": "four"}\' "$REEF_STEP_URL/reef-step/trial"'
)


async def gone(marker: str) -> None:
    await eventually(
        lambda: asyncio.to_thread(processes_with, marker),
        10,
        f"processes running {marker} to be gone",
        satisfied=lambda pids: not pids,
    )


async def test_a_session_that_never_stops_is_stopped_at_the_wall_bound_with_its_children(
    start_reefine: StartReefine, pi: Path
) -> None:
    reefine = await start_reefine(harness__proposer_agent="pi", harness__proposer_wall_s=12)
    assert reefine.agent is not None
    reefine.agent.commands = ["sleep 987654"]

    progress = await reefine.settled(await reefine.train("make answers brief"), AGENT_SETTLES_S)

    assert progress["result"] == "skipped"
    assert progress["reason"] == "the agent was stopped at the wall bound before it changed any entry"
    assert any("stopped at the wall bound of 12 s, with everything it started" in line for line in activity(progress))
    await gone("987654")


async def test_the_model_call_budget_is_enforced(start_reefine: StartReefine, pi: Path) -> None:
    reefine = await start_reefine(harness__proposer_agent="pi", harness__proposer_model_calls=3)
    assert reefine.agent is not None
    reefine.agent.commands = ["true"] * 10

    progress = await reefine.settled(await reefine.train("make answers brief"), AGENT_SETTLES_S)

    assert reefine.agent.calls == 3  # the fourth call was refused at the socket and never reached the model
    assert any(line.endswith("3 model call(s), 0 trial(s)") for line in activity(progress)), activity(progress)
    assert progress["result"] == "skipped"


async def test_the_trials_bound_refuses_a_trial_past_it(start_reefine: StartReefine, pi: Path) -> None:
    reefine = await start_reefine(harness__proposer_agent="pi", harness__proposer_trials=1)
    assert reefine.agent is not None
    reefine.agent.commands = [WRITE_SKILL, "harness-trial 'hello'", "harness-trial 'hello again'"]

    progress = await reefine.settled(await reefine.train("make answers brief"), AGENT_SETTLES_S)

    assert "final answer (exit 0" in reefine.agent.results[1]
    assert reefine.agent.results[2].startswith("refused: this run may make 1 trials; all are spent.")
    lines = activity(progress)
    assert "harness-trial: refused: all 1 trials are spent" in lines
    assert any(line.endswith("1 trial(s)") for line in lines if line.startswith("agent stopped")), lines


async def test_code_that_asks_the_daemon_directly_gets_no_more_trials(start_reefine: StartReefine, pi: Path) -> None:
    reefine = await start_reefine(harness__proposer_agent="pi", harness__proposer_trials=1)
    assert reefine.agent is not None
    reefine.agent.commands = [WRITE_SKILL, DIRECT_TRIALS, FORGED_TOKEN]

    progress = await reefine.settled(await reefine.train("make answers brief"), AGENT_SETTLES_S)

    answers = [json.loads(line) for line in reefine.agent.results[1].strip().splitlines()]
    assert [answer["code"] for answer in answers] == [0, 1, 1], answers
    assert answers[0]["output"].startswith("final answer (exit 0")
    spent = "refused: this run may make 1 trials; all are spent."
    assert answers[1]["output"].startswith(spent) and answers[2]["output"].startswith(spent)
    assert "refused: this tool needs the token lent for this run" in reefine.agent.results[2]
    lines = activity(progress)
    assert any(line.endswith("1 trial(s)") for line in lines if line.startswith("agent stopped")), lines
    metrics = (await reefine.releases())[0]["metrics"]
    assert [trial["prompt"] for trial in metrics["agent"]["trials"]] == ["one"]


async def test_a_trial_over_its_time_is_stopped_with_everything_it_started(
    start_reefine: StartReefine, pi: Path, tmp_path: Path
) -> None:
    hanging = tmp_path / "agent-bin" / "hanging-agent"
    hanging.parent.mkdir()
    hanging.write_text("#!/bin/sh\nsleep 987653 &\nexec sleep 987652\n")
    hanging.chmod(0o755)
    reefine = await start_reefine(
        harness__proposer_agent="pi", harness__proposer_trial_s=3, harness__trial=str(hanging),
        harness__trial_timeout_s=3,
    )  # fmt: skip
    assert reefine.agent is not None
    reefine.agent.commands = [WRITE_SKILL, "harness-trial 'hello'; echo status $?"]

    progress = await reefine.settled(await reefine.train("make answers brief"), AGENT_SETTLES_S)

    tried = reefine.agent.results[1]
    assert "final answer (timed out" in tried, tried
    assert "the trial was stopped at its bound of 3 s, with everything it started" in tried
    assert tried.strip().endswith("status 1")
    assert any(line.startswith("harness-trial: timed out in 3.") for line in activity(progress)), activity(progress)
    await gone("987653")
    await gone("987652")
