"""Evaluation runs: one task on the served tree and on the candidate, in the jail and through reef, then a verdict.

Each run is the trial's general run (`TrialRunner.execute`): the adapter's agent, headless, on the tree, with the
task's prompt and its fixture files in the workspace; its model calls are recorded under `reef-trials`, tagged
with the version (the served release id, or `candidate`) and the task id. The two runs of a task go side by side,
so both see the same load; the gate runs several tasks at once (`gate.py`). One candidate's evaluation has its own
bounds, shared by every run and judge call however many run at once: a wall-clock deadline (`harness.eval-wall-s`:
each run's time limit is what is left of it) and a number of model calls (`harness.eval-model-calls`: the model
sockets of all its runs count against one budget, checked and counted in one step, so calls past it are refused
and never reach the model, not even from runs already in flight; the judge takes its two calls the same way). A
task that starts once a bound is spent, or whose run failed once it was, is `not run`, and says which bound.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Literal

from recipes.reefine.judge import Judgement, pairwise, ranked, regex_verdict
from recipes.reefine.model import ServedModel
from recipes.reefine.trial import Finished, TrialRunner
from reef_contract import EvalTask, EvidenceRow
from reef_daemon.recipe_api import Budget
from reef_harness import Entry

CANDIDATE = "candidate"
RowVerdict = Literal["better", "same", "worse", "not run"]
PREVIEW = 120


@dataclass(frozen=True)
class EvalBounds:
    wall_s: float
    model_calls: int
    judge: str = "pairwise"  # how a task without a regex is judged: pairwise (two calls) or ranked (one)


@dataclass(frozen=True)
class Compared:
    """One task's evidence row, whether the candidate's answer shows the task's check (None: not known), and the
    two runs (None where the bounds stopped the task before it ran)."""

    row: EvidenceRow
    candidate_passed: bool | None
    served_run: Finished | None = None
    candidate_run: Finished | None = None


class Evaluation:
    """One candidate's evaluation against the served version (`served_release`), within `bounds`. The judge is
    `judge_model` (the served model); its calls count against the same budget as the agents'."""

    def __init__(
        self, trial: TrialRunner, model: str, judge_model: ServedModel, served_release: str, bounds: EvalBounds
    ) -> None:
        self._trial = trial
        self._model = model
        self._judge = judge_model
        self._served_release = served_release
        self.bounds = bounds
        self.budget = Budget(bounds.model_calls)
        self._started = time.monotonic()
        self._deadline = self._started + bounds.wall_s

    @property
    def seconds(self) -> float:
        return round(time.monotonic() - self._started, 2)

    def spent(self) -> str | None:
        """Which bound stops further work, or None."""
        if time.monotonic() >= self._deadline:
            return f"the evaluation's {self.bounds.wall_s:g} s (harness.eval-wall-s) were spent"
        if self.budget.used >= self.budget.limit:
            return f"the evaluation's {self.budget.limit} model calls (harness.eval-model-calls) were spent"
        return None

    async def compare(self, served: list[Entry], candidate: list[Entry], task: EvalTask, kind: str) -> Compared:
        """Run `task` on both trees and judge the candidate against the served version."""
        why = self.spent()
        if why is not None:
            return Compared(_row(task, kind, "not run", "not run", "not run", f"stopped: {why}"), None)
        served_run, candidate_run = await asyncio.gather(
            self._run(served, self._served_release, task), self._run(candidate, CANDIDATE, task)
        )
        runs = served_run, candidate_run
        served_failed, candidate_failed = served_run.failure(), candidate_run.failure()
        if (served_failed or candidate_failed) and (why := self.spent()) is not None:
            shown = _outcome(served_run), _outcome(candidate_run)
            return Compared(_row(task, kind, *shown, "not run", f"stopped: {why}"), None, *runs)
        judgement = await self._judge_runs(task, served_run, candidate_run)
        if judgement is None:
            why = self.spent() or "no judge call was left"
            shown = _outcome(served_run), _outcome(candidate_run)
            return Compared(_row(task, kind, *shown, "not run", f"stopped before the judge: {why}"), None, *runs)
        passed = _passes(task, judgement)
        row = _row(task, kind, _outcome(served_run), _outcome(candidate_run), judgement.verdict, judgement.reason)
        return Compared(row, passed, *runs)

    async def _run(self, tree: list[Entry], version: str, task: EvalTask) -> Finished:
        left = max(self._deadline - time.monotonic(), 0.001)
        return await self._trial.execute(
            tree,
            self._model,
            task["prompt"],
            release=version,
            fixture=task["fixture"],
            tags={"version": version, "task": task["id"]},
            budget=self.budget,
            timeout_s=left,
        )

    async def _judge_runs(self, task: EvalTask, served: Finished, candidate: Finished) -> Judgement | None:
        """The verdict: a failed run loses; the task's regex decides where it has one; else the pairwise judge
        (None when the bounds leave no room for its two calls)."""
        served_failed, candidate_failed = served.failure(), candidate.failure()
        if task["regex"]:
            return await regex_verdict(task["regex"], served.answer(), candidate.answer())
        if served_failed and candidate_failed:
            return Judgement("same", f"neither version answered (candidate: {candidate_failed})")
        if candidate_failed:
            return Judgement("worse", f"the candidate's run failed: {candidate_failed}")
        if served_failed:
            return Judgement("better", f"the served version's run failed ({served_failed}); the candidate answered")
        calls = 1 if self.bounds.judge == "ranked" else 2  # ranked: one call; pairwise: both orders
        if self.spent() is not None or self.budget.used + calls > self.budget.limit:
            return None
        self.budget.used += calls
        answer_served, answer_candidate = served.answer() or "", candidate.answer() or ""
        compare = ranked if self.bounds.judge == "ranked" else pairwise
        try:
            return await asyncio.wait_for(
                compare(self._judge, task, answer_served, answer_candidate), self._deadline - time.monotonic()
            )
        except TimeoutError:
            return None


def _passes(task: EvalTask, judgement: Judgement) -> bool:
    """Whether the candidate shows the check: its answer matches the regex, or the judge prefers it."""
    if task["regex"]:
        return judgement.candidate_matched is True
    return judgement.verdict == "better"


def _outcome(run: Finished) -> str:
    failed = run.failure()
    if failed is not None:
        return f"failed: {failed}"[:300]
    answer = " ".join((run.answer() or "").split())
    return f"answered: {answer[:PREVIEW]}" + ("…" if len(answer) > PREVIEW else "")


def _row(task: EvalTask, kind: str, served: str, candidate: str, verdict: RowVerdict, reason: str) -> EvidenceRow:
    return {
        "task": task["id"],
        "kind": "behaviour" if kind == "behaviour" else task["kind"],
        "protected": task["protected"],
        "prompt": " ".join(task["prompt"].split())[:PREVIEW],
        "served": served,
        "candidate": candidate,
        "verdict": verdict,
        "reason": reason,
    }
