"""The evaluation gate runs several tasks at once, `harness.eval-parallel` at a time, and still keeps its bounds and
its evidence in task order; where its runs showed the candidate answering, they stand in for the health trial, and
a candidate that breaks the agent is still rejected with the trial's reason.

The pi tests hold the fake upstream's answers to the agents, so what is in flight at once is what the model sees;
the others drive the gate itself with agent runs that end only when the test lets them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, cast

from adapters import get_adapter
from recipes.reefine.behaviour import NO_REQUEST
from recipes.reefine.evaluation import EvalBounds
from recipes.reefine.gate import Gate, GateRules
from recipes.reefine.model import ServedModel
from recipes.reefine.trial import Finished, TrialRunner
from reef_contract import REPORT_SOURCES, TRIAL_SCENARIO, EvalTask
from reef_daemon.harness.model_relay import Budget
from reef_daemon.store import Store
from reef_harness import Entry
from tests.support.fake_proposer_model import answer, skill
from tests.support.reefine_testing import SCENARIO, Reefine, StartReefine
from tests.support.waiting import eventually

FIRST, SECOND = "First task: what is the capital of France?", "Second task: name the capital of France."
BEHAVIOUR = "What is the capital of France?"  # the scripted plan's behaviour check


async def start_with_agent(start_reefine: StartReefine, agent: Path, **settings: Any) -> Reefine:
    """A reefine daemon whose trials and gate runs start `agent` (pi, or the scripted stand-in for it)."""
    return await start_reefine(harness__trial=str(agent), **settings)


async def protected(reefine: Reefine, prompt: str) -> str:
    task = await reefine.ok(
        "POST", f"/reef/scenarios/{SCENARIO}/tasks", {"prompt": prompt, "regex": "Paris", "protected": True}
    )
    return str(task["id"])


async def trial_tags(reefine: Reefine) -> list[dict[str, str]]:
    """The tags of every model call recorded under reef-trials."""
    listed = await reefine.ok("GET", f"/reef/records?scenario={TRIAL_SCENARIO}&type=inference")
    return [(await reefine.ok("GET", f"/reef/records/{row['id']}"))["tags"] for row in listed["records"]]


async def test_two_tasks_are_in_flight_at_once_and_the_evidence_keeps_task_order(
    start_reefine: StartReefine, scripted_pi: Path
) -> None:
    reefine = await start_with_agent(start_reefine, scripted_pi, harness__eval_parallel="2")
    assert reefine.agents is not None
    first, second = await protected(reefine, FIRST), await protected(reefine, SECOND)
    held = asyncio.Event()
    reefine.agents.hold = held  # every agent's model call waits here until the test lets them all go
    reefine.model.script("answer", answer("Brief.\n\nHow to use: ask.", skill("brief")))
    request_id = await reefine.train("be brief")

    def asked() -> list[str]:
        bodies = [json.dumps(json.loads(each.body)) for each in reefine.agents.received] if reefine.agents else []
        return [prompt for prompt in (BEHAVIOUR, FIRST, SECOND) for body in bodies if f'"{prompt}' in body]

    # The behaviour check and the first task, each on both versions, wait on the model at the same moment.
    await eventually(
        asked, 120, "the behaviour check and the first task in flight together", satisfied=lambda seen: len(seen) >= 4
    )
    assert sorted(asked()) == sorted([BEHAVIOUR, BEHAVIOUR, FIRST, FIRST])  # the second waits for a place
    held.set()
    progress = await reefine.settled(request_id, 180)

    assert progress["result"] == "selected", progress
    assert [row["task"] for row in progress["evidence"]["rows"]] == ["behaviour", first, second]
    assert [row["verdict"] for row in progress["evidence"]["rows"]] == ["same", "same", "same"]
    assert sorted(asked()) == sorted([BEHAVIOUR, BEHAVIOUR, FIRST, FIRST, SECOND, SECOND])  # no health prompt


async def test_the_model_call_bound_holds_across_tasks_run_at_once(
    start_reefine: StartReefine, scripted_pi: Path
) -> None:
    # Six runs of one model call each (the behaviour check and two tasks, on both versions), four at once; three
    # calls allowed.
    reefine = await start_with_agent(
        start_reefine, scripted_pi, harness__eval_parallel="2", harness__eval_model_calls="3"
    )
    first, second = await protected(reefine, FIRST), await protected(reefine, SECOND)
    reefine.model.script("answer", answer("Brief.\n\nHow to use: ask.", skill("brief")))
    progress = await reefine.settled(await reefine.train("be brief"), 180)

    spent = "stopped: the evaluation's 3 model calls (harness.eval-model-calls) were spent"
    assert progress["result"] == "rejected", progress
    assert progress["reason"].startswith("the evaluation gate rejected it: ") and progress["reason"].endswith(spent)
    evidence = progress["evidence"]
    assert evidence["model_calls"] == 3
    assert [row["task"] for row in evidence["rows"]] == ["behaviour", first, second]
    assert [row for row in evidence["rows"] if row["verdict"] == "not run" and row["reason"] == spent]
    # The model saw exactly the three calls the bound allowed; the sockets refused the rest.
    assert len([tag for tag in await trial_tags(reefine) if "task" in tag]) == 3


def extension(code: str) -> dict[str, Any]:
    return {"id": "notify", "kind": "extension", "config": {"name": "notify", "code": code}}


async def test_a_candidate_that_breaks_the_agent_is_still_rejected_with_the_trials_reason(
    start_reefine: StartReefine, pi: Path
) -> None:
    reefine = await start_with_agent(start_reefine, pi)
    reefine.model.script("answer", answer("Notify.\n\nHow to use: wait.", extension("export default (;\n")))
    progress = await reefine.settled(await reefine.train("notify me when done"), 120)

    assert progress["result"] == "rejected" and progress["release"] is None, progress
    assert progress["reason"].startswith("the candidate failed its trial run, the served harness did not: pi exited")
    assert 'Failed to load extension "' in progress["reason"] and "notify.ts" in progress["reason"]
    check = (await reefine.releases())[0]["metrics"]["check"]
    # The candidate never answered in the gate, so its own health prompt ran; the served version's gate run, which
    # answered, stood in for the served harness's.
    assert not check["trial"]["passed"] and check["trial"]["stood_in"] is None
    assert check["served_trial"]["passed"] and check["served_trial"]["stood_in"] == "behaviour"
    behaviour = progress["evidence"]["rows"][0]
    assert behaviour["candidate"].startswith("failed: exited with status") and behaviour["served"].startswith(
        "answered"
    )
    # No health prompt ran on the served harness (it would have made one model call).
    assert not [tag for tag in await trial_tags(reefine) if tag.get("release") == f"served-for-{SCENARIO}"]


class HeldRuns(TrialRunner):
    """Agent runs that answer only once the test lets their task finish; `in_flight` is what runs now."""

    def __init__(self) -> None:
        super().__init__(get_adapter("pi"), "off", 60.0, "none", [])
        self.in_flight: list[tuple[str, str]] = []
        self.most = 0
        self.finish: dict[str, asyncio.Event] = {}

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
        assert tags is not None
        run = (tags["task"], tags["version"])
        self.in_flight.append(run)
        self.most = max(self.most, len(self.in_flight))
        try:
            await self.finish.setdefault(tags["task"], asyncio.Event()).wait()
        finally:
            self.in_flight.remove(run)
        return Finished(True, "", 0.5, 0, f"The capital is Paris ({run[1]}).\n")

    def running(self) -> list[str]:
        return sorted(task for task, _version in self.in_flight)

    def has(self, task: str) -> Callable[[list[str]], bool]:
        return lambda running: task in running


def task(number: int) -> EvalTask:
    return {
        "id": f"t{number}",
        "scenario": SCENARIO,
        "kind": "task",
        "prompt": f"task {number}",
        "fixture": {},
        "regex": "Paris",
        "judge": None,
        "protected": True,
        "source_record": None,
        "created_at": 0.0,
    }


async def test_the_gate_caps_tasks_in_flight_and_lists_them_in_task_order_whatever_order_they_end_in() -> None:
    runs = HeldRuns()
    tasks = [task(number) for number in range(1, 5)]

    async def source(store: Store, scenario: str, replays: int, sources: Collection[str]) -> list[EvalTask]:
        return tasks

    async def note(line: str) -> None:
        return None

    gate = Gate(runs, "m", GateRules(0, 0, REPORT_SOURCES, EvalBounds(600.0, 100), parallel=2), source)
    judge = cast(ServedModel, None)  # a regex decides every task here
    gating = asyncio.create_task(gate.evaluate(cast(Store, None), SCENARIO, "r0", [], [], NO_REQUEST, judge, note))
    await eventually(runs.running, 30, "two tasks in flight", satisfied=lambda now: len(now) == 4)
    assert runs.running() == ["t1", "t1", "t2", "t2"]  # both versions of a task side by side, two tasks at once
    for ended, starts in (("t2", "t3"), ("t3", "t4")):  # t1 is held throughout and ends last
        runs.finish.setdefault(ended, asyncio.Event()).set()
        await eventually(runs.running, 30, f"{starts} to take {ended}'s place", satisfied=runs.has(starts))
        assert runs.running() == sorted(["t1", "t1", starts, starts])
    runs.finish.setdefault("t4", asyncio.Event()).set()
    runs.finish.setdefault("t1", asyncio.Event()).set()
    gated = await gating

    assert runs.most == 4
    assert [row["task"] for row in gated.evidence["rows"]] == ["t1", "t2", "t3", "t4"]
    assert gated.evidence["passed"], gated.evidence
    # The first task's candidate run stands in for the health trial, though it ended last.
    assert gated.candidate is not None and gated.candidate.stood_in == "t1"
    assert gated.candidate.answer == "The capital is Paris (candidate)."
