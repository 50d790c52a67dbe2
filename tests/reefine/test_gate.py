"""The evaluation gate: the served version and the candidate run the behaviour check, the protected tasks and the
replays through reef; a regex or the pairwise judge decides; the evidence stays with the step. A candidate is
rejected and one published through the real pi; how the gate weighs its evidence is tested with the scripted
stand-in for `pi -p` (tests.support.scripted_pi), which reads the harness as pi does.

The agent's model is the fake upstream, which answers "The capital of France is Paris." unless the harness carries a
rule `REEF-SAY[text]`, so a candidate's rule changes what the agent answers.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from reef_cli.app import app
from reef_contract import TRIAL_SCENARIO
from reef_daemon.context import DAEMON
from reef_daemon.harness.access import harness_recipe
from tests.support.fake_proposer_model import answer, plan, prefers
from tests.support.reefine_testing import SCENARIO, Reefine, StartReefine


def rule_saying(text: str) -> dict[str, Any]:
    return {"id": "say", "kind": "rules", "config": {"text": f"Always answer exactly: REEF-SAY[{text}]"}}


async def start_with_agent(start_reefine: StartReefine, agent: Path, **settings: Any) -> Reefine:
    """A reefine daemon whose trials and gate runs start `agent` (pi, or the scripted stand-in for it)."""
    return await start_reefine(harness__trial=str(agent), **settings)


async def reef(reefine: Reefine, *args: str) -> tuple[int, str]:
    """Run the CLI in a thread: it blocks on HTTP while this loop serves the daemon."""
    runner = CliRunner(env={"COLUMNS": "240"})  # wide enough for the evidence table on one line a row
    result = await asyncio.to_thread(runner.invoke, app, [*args, "--url", reefine.url])
    return result.exit_code, result.output


async def request_saying(reefine: Reefine, text: str, check: dict[str, Any]) -> dict[str, Any]:
    """A request whose candidate makes the agent answer `text`, with `check` as its behaviour check."""
    reefine.model.script("plan", plan(check))
    reefine.model.script("answer", answer(f"Say {text}.\n\nHow to use: ask anything.", rule_saying(text)))
    progress: dict[str, Any] = await reefine.settled(await reefine.train(f"always say {text}"))
    return progress


async def low_scored_conversation(reefine: Reefine, opening: str) -> str:
    """A conversation in the scenario that opened with `opening` and scored low: a replay, with the served answer."""
    chat = {"model": "fake-proposer", "messages": [{"role": "user", "content": opening}]}
    async with reefine.session.post(reefine.url + "/v1/chat/completions", json=chat, headers=reefine.headers()) as sent:
        receipt = sent.headers["x-reef-agent-record-id"]
    await reefine.ok("POST", "/reef/report", {"score": 0.1, "references": [receipt]})
    return receipt


async def test_a_candidate_that_breaks_a_protected_task_is_rejected_with_that_task_named(
    start_reefine: StartReefine, pi: Path
) -> None:
    reefine = await start_with_agent(start_reefine, pi)
    task = await reefine.ok(
        "POST",
        f"/reef/scenarios/{SCENARIO}/tasks",
        {"prompt": "What is the capital of France?", "regex": "Paris", "protected": True},
    )
    progress = await request_saying(reefine, "no comment", {"prompt": "Say something.", "regex": "no comment"})

    assert progress["result"] == "rejected" and progress["release"] is None, progress
    assert progress["reason"].startswith(f"the evaluation gate rejected it: protected task {task['id']} got worse")
    assert "/Paris/ no longer matches" in progress["reason"]
    evidence = progress["evidence"]
    assert not evidence["passed"]
    rows = {row["task"]: row for row in evidence["rows"]}
    assert rows["behaviour"]["verdict"] == "better" and rows["behaviour"]["candidate"] == "answered: no comment"
    assert (rows[task["id"]]["verdict"], rows[task["id"]]["served"]) == (
        "worse",
        "answered: The capital of France is Paris.",
    )
    assert (await reefine.ok("GET", "/reef/harness"))["version"] == "v0"

    # Each run went through reef under reef-trials, tagged with its version and task.
    listed = await reefine.ok("GET", f"/reef/records?scenario={TRIAL_SCENARIO}&type=inference")
    tags = [(await reefine.ok("GET", f"/reef/records/{row['id']}"))["tags"] for row in listed["records"]]
    served = (await reefine.ok("GET", "/reef/harness"))["release_id"]
    for version in (served, "candidate"):
        assert {"version": version, "task": task["id"]}.items() <= next(
            tag for tag in tags if tag.get("task") == task["id"] and tag.get("version") == version
        ).items()


async def test_a_candidate_that_fixes_a_replayed_failure_is_published_with_the_evidence_table(
    start_reefine: StartReefine, pi: Path
) -> None:
    reefine = await start_with_agent(start_reefine, pi)
    await low_scored_conversation(reefine, "What is two plus two?")
    # The judge prefers the candidate's answer in both orders: B when it is second, A when it is first.
    reefine.model.script("judge", prefers("B", "it answers four"), prefers("A", "it answers four"))
    progress = await request_saying(reefine, "four", {"prompt": "What is two plus two?", "regex": "four"})

    assert progress["result"] == "selected" and progress["version"] == "v1", progress
    evidence = progress["evidence"]
    assert evidence["passed"] and evidence["ran"]
    replay = next(row for row in evidence["rows"] if row["kind"] == "replay")
    assert (replay["served"], replay["candidate"]) == ("answered: The capital of France is Paris.", "answered: four")
    assert (replay["verdict"], replay["reason"]) == ("better", "it answers four")

    # The judge was asked in both orders: served then candidate, candidate then served.
    first, second = reefine.model.seen("judge")
    assert first.index("Paris") < first.index("four") and second.index("four") < second.index("Paris")
    assert "What is two plus two?" in first

    # The release keeps the table: in its manifest and its step's metrics, and `reef versions vN` shows it.
    release = await harness_recipe(reefine.server.app[DAEMON]).harness.read(SCENARIO, progress["release"])
    assert release.manifest["evidence"] == evidence
    rows = await reefine.releases()
    assert rows[0]["metrics"]["evidence"] == evidence
    code, output = await reef(reefine, "versions", "--scenario", SCENARIO, "v1")
    assert code == 0, output
    assert output.startswith("v1 (selected): gate passed: the behaviour check passed;")
    assert "evidence for v1 of harness" in output and "replay" in output and "it answers four" in output
    code, output = await reef(reefine, "versions", "--scenario", SCENARIO, "v1", "--json")
    assert code == 0 and json.loads(output)["evidence"] == evidence


async def test_the_judge_must_agree_in_both_orders(start_reefine: StartReefine, scripted_pi: Path) -> None:
    reefine = await start_with_agent(start_reefine, scripted_pi)
    await low_scored_conversation(reefine, "What is two plus two?")
    reefine.model.script("judge", prefers("A", "the first is better"), prefers("A", "the first is better"))
    progress = await request_saying(reefine, "four", {"prompt": "What is two plus two?", "regex": "four"})

    replay = next(row for row in progress["evidence"]["rows"] if row["kind"] == "replay")
    assert replay["verdict"] == "same" and replay["reason"].startswith("the two orders disagree")
    assert progress["result"] == "selected"  # a replay is evidence; it does not block


async def test_a_plan_without_a_usable_behaviour_check_is_not_published(
    start_reefine: StartReefine, scripted_pi: Path
) -> None:
    reefine = await start_with_agent(start_reefine, scripted_pi)
    progress = await request_saying(reefine, "four", {"prompt": "What is two plus two?", "regex": "(unclosed"})

    assert progress["result"] == "rejected" and progress["release"] is None
    assert progress["reason"] == (
        "the evaluation gate rejected it: no usable behaviour check was written at plan time: "
        "the plan: the behaviour check's regex does not compile: missing ) at position 9"
    )


async def test_a_behaviour_check_whose_regex_runs_too_long_fails_with_the_reason(
    start_reefine: StartReefine, scripted_pi: Path
) -> None:
    reefine = await start_with_agent(start_reefine, scripted_pi)
    progress = await request_saying(reefine, "a" * 40 + "b", {"prompt": "Say it.", "regex": "(a|a)+$"})

    assert progress["result"] == "rejected" and progress["release"] is None, progress
    assert progress["reason"] == (
        "the evaluation gate rejected it: the behaviour check failed on the candidate: "
        "/(a|a)+$/ matches neither answer (candidate: regex timed out after 1 s)"
    )


@pytest.mark.parametrize(
    ("setting", "bound"),
    [
        ({"harness__eval_model_calls": "1"}, "the evaluation's 1 model calls (harness.eval-model-calls) were spent"),
        ({"harness__eval_wall_s": "0.001"}, "the evaluation's 0.001 s (harness.eval-wall-s) were spent"),
    ],
    ids=["model-calls", "wall"],
)
async def test_evaluation_bounds_are_enforced(
    start_reefine: StartReefine, setting: dict[str, str], bound: str, scripted_pi: Path
) -> None:
    reefine = await start_with_agent(start_reefine, scripted_pi, **setting)
    progress = await request_saying(reefine, "four", {"prompt": "What is two plus two?", "regex": "four"})

    assert progress["result"] == "rejected", progress
    assert (
        progress["reason"] == f"the evaluation gate rejected it: the behaviour check did not finish: stopped: {bound}"
    )
    assert progress["evidence"]["model_calls"] <= 1
    listed = await reefine.ok("GET", f"/reef/records?scenario={TRIAL_SCENARIO}&type=inference")
    tags = [(await reefine.ok("GET", f"/reef/records/{row['id']}"))["tags"] for row in listed["records"]]
    assert len([tag for tag in tags if tag.get("task") == "behaviour"]) <= 1  # the socket refused the rest


async def test_the_agent_proposers_check_json_is_its_behaviour_check(start_reefine: StartReefine, pi: Path) -> None:
    reefine = await start_with_agent(start_reefine, pi, harness__proposer_agent="pi")
    assert reefine.agent is not None
    reefine.agent.commands = [
        "printf 'Always answer exactly: REEF-SAY[four]\\n' > rules/say.md",
        "printf 'Say four.\\n\\nHow to use: ask.' > design.md",
        """printf '{"prompt": "What is two plus two?", "regex": "^four$"}' > check.json""",
    ]
    progress = await reefine.settled(await reefine.train("always say four"))

    assert progress["result"] == "selected", progress
    behaviour = progress["evidence"]["rows"][0]
    assert (behaviour["task"], behaviour["prompt"], behaviour["verdict"]) == (
        "behaviour",
        "What is two plus two?",
        "better",
    )


async def test_a_tasks_fixture_files_are_in_the_agents_workspace(
    start_reefine: StartReefine, scripted_pi: Path
) -> None:
    reefine = await start_with_agent(start_reefine, scripted_pi)
    # pi reads AGENTS.md from the folder it starts in: the fixture's words reach the model only from there.
    fixture = {"AGENTS.md": "Answer exactly: REEF-SAY[the fixture was read]\n"}
    task = await reefine.ok(
        "POST",
        f"/reef/scenarios/{SCENARIO}/tasks",
        {"prompt": "Read the project.", "fixture": fixture, "regex": "fixture was read", "protected": True},
    )
    progress = await request_saying(reefine, "four", {"prompt": "What is two plus two?", "regex": "four"})

    row = next(row for row in progress["evidence"]["rows"] if row["task"] == task["id"])
    assert (row["served"], row["candidate"], row["verdict"]) == (
        "answered: the fixture was read",
        "answered: the fixture was read",
        "same",
    )
    assert progress["result"] == "selected"
