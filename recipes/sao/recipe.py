"""The SAO recipe: each eligible scored rollout drives a training step of the embedded model, and the new weights
are swapped into the serving runtime between tokens, so the next request is served by them without a restart.

With `training.trainer = slime`, rollouts are handed to a Slime run instead (`slime/`), which trains and pushes the
weights into the SGLang engines reef serves from.

`GrpoRecipe` is the control arm: the same DIS loss, group-normalised rewards instead of a critic.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any, ClassVar

from recipes.sao.checkpoints import CheckpointRepo
from recipes.sao.rollout import Rollout, judge_report, parse_version
from recipes.sao.settings import training_of
from recipes.sao.slime.contract import check_ready, node_address, plan_run
from recipes.sao.slime.run import SlimeRun
from recipes.sao.trainer import Trainer
from reef_daemon.contract import CriticStatus, RecipeStatus, RecordType, ScoreScale, low_score_below
from reef_daemon.recipe_api import (
    Conflict,
    Ineligible,
    NotFound,
    Recipe,
    RecipeContext,
    Scenario,
    Settings,
    SettingsError,
    StepOutcome,
    Unit,
    Verdict,
    WeightSwappable,
)

log = logging.getLogger("reef.sao")

REEF_ROOT = Path(__file__).resolve().parents[2]  # what a Slime job puts on its path to import the rollout function


class SaoRecipe(Recipe):
    name: ClassVar[str] = "sao"
    consumes: ClassVar[tuple[RecordType, ...]] = ("report",)
    keeps_releases: ClassVar[bool] = True  # checkpoints live under reef.state-dir
    advantage: ClassVar[str] = "gae"
    # The trainer's ratios are exact for rollouts sampled at temperature 1 with top-p 1, so requests that set no
    # sampling get those instead of the embedded runtime's usual defaults.
    profile: ClassVar[dict[str, Any]] = {"inference.temperature": 1.0, "inference.top-p": 1.0}

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.training = training_of(settings)  # refuses a critic lr a Slime run's full-model critic cannot take
        self.batch_size = self.training.batch_size
        self._runtime: WeightSwappable | None = None
        self._trainer: Trainer | None = None
        self._bound: str | None = None  # the one scenario this process trains
        self._claimed: set[str] = set()  # rollouts waiting in a batch
        self._rollouts: dict[str, Rollout] = {}  # by report id
        self._head: str | None = None
        self._checkpoints: CheckpointRepo | None = None
        self._last_swap_s: float | None = None
        self._checkpoint_list: list[str] = []  # oldest first
        self._slime: SlimeRun | None = None
        if self.training.trainer == "slime":
            check_ready(settings)  # refused here, before anything starts, with what to install
        self._started = time.time()  # rollouts made before this run by trained weights are not trained on

    async def start(self, context: RecipeContext) -> None:
        runtime = context.runtime
        if not isinstance(runtime, WeightSwappable):
            raise SettingsError(
                f"the {self.name} recipe trains the embedded model; start reef without --inference.upstream-url"
            )
        self._runtime = runtime
        if self.training.trainer == "slime":
            plan = plan_run(self.settings, REEF_ROOT, node_address())
            self._slime = SlimeRun(plan, self.settings.reef.state_dir / "logs")
            await asyncio.to_thread(self._slime.launch)
            return
        scale: ScoreScale = {"min": self.settings.reports.score_min, "max": self.settings.reports.score_max}
        failed_below = low_score_below(scale)
        self._trainer = await asyncio.to_thread(
            Trainer, runtime.weights_dir, self.training, self.advantage, failed_below
        )
        for scenario in context.store.scenarios.all():
            if scenario.recipe == self.name and await context.store.steps.last(scenario.name) is not None:
                await self._bind(scenario.name)
                break

    @property
    def trainer(self) -> Trainer | None:
        return self._trainer

    def _serving(self) -> WeightSwappable:
        if self._runtime is None:
            raise RuntimeError(f"the {self.name} recipe is not started")
        return self._runtime

    def _version(self) -> str:
        return self._serving().weight_version

    async def _bind(self, scenario: str) -> None:
        """Train this scenario from now on: open its checkpoints and resume from the latest one."""
        assert self._trainer is not None
        self._bound = scenario
        repo = CheckpointRepo(self.settings.reef.state_dir / "checkpoints" / scenario)
        await asyncio.to_thread(repo.open)
        self._checkpoints = repo
        latest = await asyncio.to_thread(repo.latest)
        if latest is None:
            manifest = {"step": 0, "steps_done": 0, "policy_updates": 0, "note": "the weights as first served"}
            self._head = await asyncio.to_thread(repo.save, self._trainer.state(), manifest, "base weights")
        else:
            await self._restore(latest.release_id)
        self._checkpoint_list = await asyncio.to_thread(repo.history)

    async def _restore(self, release_id: str) -> str:
        """Load the repository's current checkpoint into the trainer and the server; returns the weight version."""
        assert self._trainer is not None and self._checkpoints is not None
        state, manifest = await asyncio.to_thread(self._checkpoints.read)
        weights = self._trainer.load(state, int(manifest["steps_done"]), int(manifest["policy_updates"]))
        version = await self._swap(weights)
        self._head = release_id
        log.info("resumed %s from checkpoint %s (step %s)", self._bound, release_id[:12], manifest["step"])
        return version

    async def _swap(self, weights: dict[str, Any]) -> str:
        began = time.perf_counter()
        version = await self._serving().swap_weights(weights)
        self._last_swap_s = time.perf_counter() - began
        return version

    def judge(self, scenario: Scenario, unit: Unit) -> Verdict:
        if self._bound is not None and scenario.name != self._bound:
            return Ineligible(f"this daemon trains scenario {self._bound}; one weight scenario per process")
        verdict, rollout = judge_report(
            unit, self._version(), self.training.max_staleness, self._claimed, run_started=self._started
        )
        if rollout is not None:
            self._claimed.add(rollout.record_id)
            self._rollouts[rollout.report_id] = rollout
        return verdict

    async def step(self, scenario: Scenario, units: list[Unit]) -> StepOutcome:
        rollouts = [self._rollouts.pop(unit.id) for unit in units]
        for rollout in rollouts:
            self._claimed.discard(rollout.record_id)
        consumed = tuple(rollout.record_id for rollout in rollouts)
        if self._slime is not None:  # Slime trains them and pushes the weights into the engines itself
            self._bound = scenario.name
            handed = await asyncio.to_thread(self._slime.hand_over, rollouts)
            handed_metrics: dict[str, Any] = {"handed_to_slime": handed, "weight_version": self._version()}
            return StepOutcome("selected", handed_metrics, also_consumed=consumed)
        assert self._trainer is not None
        if self._bound is None:
            await self._bind(scenario.name)
        stale = self._stale(rollouts)
        if stale:
            return StepOutcome("skipped", {"reason": stale}, release_id=self._head, also_consumed=consumed)
        result = await asyncio.to_thread(self._trainer.step, rollouts)
        metrics = dict(result.metrics)
        parent = self._head
        if metrics["policy_updated"]:
            try:
                metrics["weight_version"] = await self._swap(result.weights)
            except RuntimeError as exc:  # the engine refused them: the old weights keep serving
                metrics.update(
                    {"reason": f"the new weights did not reach the engine: {exc}", "weight_version": self._version()}
                )
                return StepOutcome("skipped", metrics, release_id=self._head, also_consumed=consumed)
            metrics["swap_s"] = round(self._last_swap_s or 0.0, 4)
            self._head = metrics["weight_version"]
        else:
            metrics["weight_version"] = self._version()
        if self._trainer.steps_done % self.training.checkpoint_every == 0:
            self._head = await self._checkpoint(metrics)
            metrics["checkpoint"] = self._head
        if not metrics["policy_updated"]:
            # A critic-only step (warm-up, or no advantage to learn from): the served weights are the same, so no
            # version; the trainer's metrics say which.
            return StepOutcome("skipped", metrics, release_id=self._head, also_consumed=consumed)
        return StepOutcome("selected", metrics, self._head, parent, also_consumed=consumed)

    def _stale(self, rollouts: list[Rollout]) -> str | None:
        """A batch is dropped whole when any rollout grew too old while it waited."""
        now = parse_version(self._version())
        for rollout in rollouts:
            produced = [parse_version(v) for v in rollout.versions]
            if now is None or any(
                p is None or p[0] != now[0] or now[1] - p[1] > self.training.max_staleness for p in produced
            ):
                return "a rollout became older than training.max-staleness while it waited for its batch"
        return None

    async def _checkpoint(self, metrics: dict[str, Any]) -> str:
        assert self._trainer is not None and self._checkpoints is not None
        manifest = {
            "step": self._trainer.steps_done,
            "steps_done": self._trainer.steps_done,
            "policy_updates": self._trainer.policy_updates,
            "weight_version": metrics["weight_version"],
            "mean_reward": metrics["mean_reward"],
        }
        message = f"checkpoint after {self._trainer.steps_done} steps"
        release = await asyncio.to_thread(self._checkpoints.save, self._trainer.state(), manifest, message)
        self._checkpoint_list = await asyncio.to_thread(self._checkpoints.history)
        return release

    async def close(self) -> None:
        if self._slime is not None:
            await asyncio.to_thread(self._slime.stop)

    def current_release(self, scenario: str) -> str | None:
        return self._head if scenario == self._bound else None

    async def rollback(self, scenario: Scenario, release_id: str) -> StepOutcome:
        if self._bound != scenario.name or self._checkpoints is None:
            raise NotFound(f"scenario {scenario.name} has no weight checkpoints", type="unknown_release")
        if not await asyncio.to_thread(self._checkpoints.has, release_id):
            raise Conflict(
                f"release {release_id} is not a checkpoint; only releases with a checkpoint can be restored",
                type="not_restorable",
            )
        parent = self._head
        new_release = await asyncio.to_thread(self._checkpoints.republish, release_id, f"roll back to {release_id}")
        version = await self._restore(new_release)
        self._checkpoint_list = await asyncio.to_thread(self._checkpoints.history)
        return StepOutcome("selected", {"weight_version": version, "checkpoint": new_release}, new_release, parent)

    def status(self) -> RecipeStatus:
        trainer = self._trainer
        status: RecipeStatus = {
            **super().status(),
            "scenario": self._bound,
            "head": self._head,
            "steps_done": trainer.steps_done if trainer else 0,
            "policy_updates": trainer.policy_updates if trainer else 0,
            "trainable_parameters": sum(p.numel() for p in trainer.trainable.values()) if trainer else 0,
            "last_swap_s": self._last_swap_s,
            "checkpoints": self._checkpoint_list,
            "sampling": self._sampling(),
        }
        if trainer is not None and self.advantage == "gae":
            status["critic"] = self._critic_status()
        return status

    def _critic_status(self) -> CriticStatus:
        """The critic's diagnostics over its recent samples: is it learning?"""
        assert self._trainer is not None
        diagnostics = self._trainer.diagnostics()
        return {
            "value_min": diagnostics["value_min"],
            "value_max": diagnostics["value_max"],
            "explained_variance": diagnostics["explained_variance"],
            "failed_positive_share": diagnostics["failed_positive_share"],
            "window": diagnostics["critic_window"],
            "warmup_steps_left": max(0, self.training.critic_warmup_steps - self._trainer.steps_done),
        }

    def _sampling(self) -> str:
        """What on-policy training needs of the defaults, and whether it has it."""
        inference = self.settings.inference
        if inference.temperature == 1.0 and inference.top_p == 1.0:
            return f"{self.name} keeps temperature 1, top-p 1 for exact on-policy ratios"
        return f"{self.name} needs temperature 1, top-p 1 for exact on-policy ratios; these were set by hand"


class GrpoRecipe(SaoRecipe):
    """The control arm: group-normalised rewards over rollouts of the same prompt, the same DIS mask, no critic."""

    name: ClassVar[str] = "grpo"
    advantage: ClassVar[str] = "grpo"
