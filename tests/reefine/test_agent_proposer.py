"""The agent proposer: a scripted model drives the real pi in the jail through a whole session; the workspace it
leaves is read back, admitted, reviewed and published, and the request's progress shows what it did."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from reef_daemon.names import TRIAL_SCENARIO
from tests.support.adapters_testing import agent_binary
from tests.support.reefine_testing import SCENARIO, Reefine, StartReefine

BAD_SKILL = "printf '# Be brief\\nAnswer in one sentence.\\n' > 'skills/be brief!.md'"
FIX_SKILL = (
    "mv 'skills/be brief!.md' skills/brief.md && printf 'A brief skill.\\n\\nHow to use: just ask.' > design.md"
    " && harness-check"
)
TRIAL = "harness-trial 'What is the capital of France?' --expect Paris"


@pytest.fixture
def pi(monkeypatch: pytest.MonkeyPatch) -> Path:
    found = agent_binary("pi")
    if found is None:
        pytest.skip("pi is not installed on this machine; scripts/setup installs it")
    monkeypatch.setenv("PATH", os.pathsep.join([str(found.parent), os.environ["PATH"]]))
    return found


def texts(progress: dict[str, Any]) -> list[str]:
    return [str(line["text"]) for line in progress["activity"]]


async def settled(reefine: Reefine, request_id: str, seconds: float = 240) -> dict[str, Any]:
    from tests.support.waiting import eventually

    progress: dict[str, Any] = await eventually(
        lambda: reefine.ok("GET", f"/reef/requests/{request_id}"),
        seconds,
        f"request {request_id} to settle",
        satisfied=lambda request: request["state"] == "settled",
    )
    return progress


async def test_pi_edits_checks_and_tries_the_harness_in_the_jail_and_it_is_published(
    start_reefine: StartReefine, pi: Path
) -> None:
    reefine = await start_reefine(harness__proposer_agent="pi")
    assert reefine.agent is not None
    reefine.agent.commands = ["cat context/request.md", BAD_SKILL, "harness-check", FIX_SKILL, TRIAL]

    progress = await settled(reefine, await reefine.train("make answers brief"))

    assert progress["result"] == "selected", "\n".join(texts(progress)) + "\n" + "\n=====".join(reefine.agent.results)
    lines = texts(progress)
    assert any(line.startswith("proposer: the agent proposer: pi") and "jail" in line for line in lines), lines
    # What the agent's tools printed came back to it: the refusal, then the admitted fix, then the trial.
    refusal, admitted, tried = reefine.agent.results[2:5]
    assert "refused: entry id 'be brief!' is not allowed" in refusal
    assert admitted.startswith("admitted:")
    assert "The capital of France is Paris." in tried and "expect /Paris/: matched" in tried
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
    assert metrics["agent"]["model_calls"] >= 7  # six turns of the agent and the trial's own
    assert progress["how_to_use"] == "just ask."

    # The trial's model call went through reef, tagged with the request.
    listed = await reefine.ok("GET", f"/reef/records?scenario={TRIAL_SCENARIO}&type=inference")
    releases = set()
    for row in listed["records"]:
        record = await reefine.ok("GET", f"/reef/records/{row['id']}")
        releases.add(record["tags"]["release"])
    assert f"trial-for-{progress['id']}" in releases and f"proposer-for-{progress['id']}" in releases
    assert SCENARIO not in releases
