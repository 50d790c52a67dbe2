"""The evaluation gate: before a candidate is published, the served version and the candidate each run the request's
behaviour check, every protected task of the scenario and its replays (`evaluation.py`), and the candidate is
published only if:

- the behaviour check passes: the candidate's answer matches its regex, or the judge prefers the candidate's
  answer in both orders. A change request whose proposal carries no usable behaviour check is rejected (the
  reason says what was wrong with it); a failure-driven proposal has no request, so no behaviour check, and is
  gated on its tasks alone;
- at most `harness.gate-max-worse` protected tasks got worse (default 0), and every protected task ran within the
  evaluation's bounds;
- a failure-driven proposal that a derived report triggered (a source other than a person: the user's next turn,
  a judge) has evidence besides that one score: a protected task ran, or the candidate answered a replay better.
  No person saw the failure, so nothing else stands between one misread verdict and a published change.

Replays (and unprotected tasks) are evidence only: they show what the candidate fixes, they do not block it.
Tasks run `harness.eval-parallel` at a time (each on both versions side by side); the evidence keeps their order,
the behaviour check first, whatever order they finish in. The first run of the candidate (and of the served
version) that answered, in that order, is kept to stand in for the health trial (`steps.py`).
Where no evaluation can run (trials off, the agent not installed here, no jail for an extension change) the gate
says why and does not block: the step publishes as before, and its evidence says it was not evaluated; except for
a proposal a derived report triggered, which then has no evidence and is refused.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

from recipes.reefine.behaviour import Checked
from recipes.reefine.evaluation import Compared, EvalBounds, Evaluation
from recipes.reefine.model import ServedModel
from recipes.reefine.proposer import Note
from recipes.reefine.trial import Trial, TrialRunner
from reef_contract import EvalTask, Evidence, EvidenceRow
from reef_daemon.recipe_api import StoreView
from reef_harness import Entry

TaskSource = Callable[[StoreView, str, int, Collection[str]], Awaitable[list[EvalTask]]]


@dataclass(frozen=True)
class GateRules:
    max_worse: int  # protected tasks that may get worse
    replays: int  # how many replays run
    sources: Collection[str]  # the report sources whose low scores make a conversation a replay
    bounds: EvalBounds
    parallel: int  # tasks run at once, each on both versions


@dataclass(frozen=True)
class Gated:
    """The gate's evidence, and the health trials its runs stand in for: the first run of the candidate (`candidate`)
    and of the served version (`served`) that answered, or None where none did (or none ran)."""

    evidence: Evidence
    candidate: Trial | None = None
    served: Trial | None = None


def not_evaluated(reason: str, served: str, derived: str | None = None) -> Evidence:
    """Evidence for a candidate no evaluation could run on: it passes, unless a derived report (`derived`: its
    source) triggered it."""
    if derived is not None:
        reason = f"{reason}; {without_evidence(derived)}"
    return {"passed": derived is None, "ran": False, "reason": reason, "served": served, "seconds": 0.0,
            "model_calls": 0, "rows": []}  # fmt: skip


def without_evidence(derived: str) -> str:
    """Why a proposal a derived report triggered is not published, and what would let it be."""
    return (
        f"a {derived} report triggered it, and no person saw the failure: it is published only when a protected"
        " task ran or a replay came out better (add a protected task: reef tasks add --protected)"
    )


class Gate:
    """The gate for one adapter's candidates: its runs are the trial's; its tasks come from `tasks`."""

    def __init__(self, trial: TrialRunner, model: str, rules: GateRules, tasks: TaskSource) -> None:
        self._trial = trial
        self._model = model
        self.rules = rules
        self._tasks = tasks

    async def evaluate(
        self,
        store: StoreView,
        scenario: str,
        served_release: str,
        served: list[Entry],
        candidate: list[Entry],
        checked: Checked,
        judge: ServedModel,
        note: Note,
        derived: str | None = None,
    ) -> Gated:
        """Run the gate's tasks on both trees, `rules.parallel` at a time; the evidence says whether the candidate
        passed and why not. `derived` is the source of the derived report that triggered the proposal, if one
        did."""
        tasks = await self._tasks(store, scenario, self.rules.replays, self.rules.sources)
        evaluation = Evaluation(self._trial, self._model, judge, served_release, self.rules.bounds)
        at_once = asyncio.Semaphore(self.rules.parallel)
        listed: list[tuple[EvalTask, str]] = [(task, task["kind"]) for task in tasks]
        if checked.check is not None:
            listed.insert(0, (checked.check.task(scenario, time.time()), "behaviour"))

        async def compare(task: EvalTask, kind: str) -> Compared:
            async with at_once:  # the bounds are checked once a place is free, so a task waiting sees them spent
                if kind == "behaviour":
                    await note(f"gate: the behaviour check, on the served version and the candidate: {task['prompt']}")
                else:
                    await note(f"gate: {kind} {task['id']}{' (protected)' if task['protected'] else ''}")
                compared = await evaluation.compare(served, candidate, task, kind)
            done = "behaviour check" if kind == "behaviour" else task["id"]
            await note(f"gate: {done}: {compared.row['verdict']} ({compared.row['reason']})")
            return compared

        async with asyncio.TaskGroup() as group:  # one that fails stops the others
            running = [group.create_task(compare(task, kind)) for task, kind in listed]
        compared = [each.result() for each in running]
        rows = [each.row for each in compared]
        behaviour = compared[0] if checked.check is not None else None
        passed, reason = decide(checked, behaviour, rows, self.rules.max_worse, derived)
        evidence: Evidence = {
            "passed": passed,
            "ran": True,
            "reason": reason,
            "served": served_release,
            "seconds": evaluation.seconds,
            "model_calls": evaluation.budget.used,
            "rows": rows,
        }
        return Gated(evidence, self._stand_in(compared, "candidate"), self._stand_in(compared, "served"))

    def _stand_in(self, compared: list[Compared], side: str) -> Trial | None:
        """The health trial of `side` that the first of its runs to answer (in the evidence's order) stands in for."""
        for each in compared:
            run = each.candidate_run if side == "candidate" else each.served_run
            task = each.row["task"]
            what = "the behaviour check" if each.row["kind"] == "behaviour" else f"{each.row['kind']} {task}"
            trial = None if run is None else self._trial.stand_in(run, task, what)
            if trial is not None:
                return trial
        return None


def decide(
    checked: Checked,
    behaviour: Compared | None,
    rows: list[EvidenceRow],
    max_worse: int,
    derived: str | None = None,
) -> tuple[bool, str]:
    """(passed, reason): the behaviour check passes and no more than `max_worse` protected tasks got worse; where
    a derived report (`derived`: its source) triggered the proposal, a protected task ran or a replay came out
    better as well (a behaviour check is written for a change request only)."""
    if checked.problem is not None:
        return False, f"no usable behaviour check was written at plan time: {checked.problem}"
    if behaviour is not None:
        row = behaviour.row
        if row["verdict"] == "not run":
            return False, f"the behaviour check did not finish: {row['reason']}"
        if not behaviour.candidate_passed:
            return False, f"the behaviour check failed on the candidate: {row['reason']}"
    protected = [row for row in rows if row["protected"] and row["kind"] != "behaviour"]
    unfinished = [row for row in protected if row["verdict"] == "not run"]
    if unfinished:
        return False, f"protected task {unfinished[0]['task']} did not finish: {unfinished[0]['reason']}"
    worse = [row for row in protected if row["verdict"] == "worse"]
    if len(worse) > max_worse:
        return False, f"protected task {worse[0]['task']} got worse: {worse[0]['reason']}"
    replays = sum(1 for row in rows if row["kind"] == "replay")
    better = sum(1 for row in rows if row["verdict"] == "better" and row["kind"] != "behaviour")
    better_replays = sum(1 for row in rows if row["verdict"] == "better" and row["kind"] == "replay")
    if derived is not None and behaviour is None and not protected and not better_replays:
        return False, f"no protected task, {replays} replay(s) run, none better; {without_evidence(derived)}"
    opening = "the behaviour check passed" if behaviour is not None else "no behaviour check (no request)"
    return True, (
        f"{opening}; {len(protected)} protected task(s), none worse beyond {max_worse}; "
        f"{better} task(s) better; {replays} replay(s) run"
    )
