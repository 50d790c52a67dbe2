"""The SAO recipe: each eligible scored rollout drives a training step of the embedded model, and the new weights
are swapped into the serving runtime between tokens, so the next request is served by them without a restart.

With `training.trainer = slime`, rollouts are handed to a Slime run instead (`slime/`), which trains and pushes the
weights into the SGLang engines reef serves from.

With `training.adapter = lora` (the default) each scenario trains a LoRA adapter of its own on the frozen base, and
the server serves every scenario by its adapter: one daemon trains several scenarios, each version is a small
checkpoint, and a rollback swaps an adapter only. With `full`, one scenario per process trains the top layers.

`GrpoRecipe` is the control arm: the same DIS loss, group-normalised rewards instead of a critic.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from recipes.sao.checkpoints import CheckpointRepo
from recipes.sao.policy import LoraBase, LoraPolicy, lora_manifest, peft_files
from recipes.sao.rollout import OUTCOME_REASON, Rollout, ServedVersions, Staleness, judge_report, lineage_lag, stale
from recipes.sao.settings import TrainingSection, training_of
from recipes.sao.slime.contract import check_ready, node_address, plan_run
from recipes.sao.slime.run import SlimeRun
from recipes.sao.trainer import Trainer, training_device
from reef_contract import (
    PERSON_SOURCE,
    CriticStatus,
    RecipeStatus,
    RecordType,
    ScoreScale,
    StepRow,
    low_score_below,
)
from reef_daemon.recipe_api import (
    AdapterServing,
    Conflict,
    Ineligible,
    NotFound,
    Recipe,
    RecipeContext,
    Scenario,
    Serving,
    Settings,
    SettingsError,
    StepOutcome,
    Unit,
    Verdict,
    WeightSwappable,
)

log = logging.getLogger("reef.sao")

REEF_ROOT = Path(__file__).resolve().parents[2]  # what a Slime job puts on its path to import the rollout function


@dataclass
class _Line:
    """One scenario's training: its trainer, its checkpoints, and the release serving it."""

    scenario: str
    trainer: Trainer
    checkpoints: CheckpointRepo | None = None
    head: str | None = None
    checkpoint_list: list[str] = field(default_factory=list)  # oldest first
    last_swap_s: float | None = None
    lineage: list[str] = field(default_factory=list)  # with LoRA: the versions that served it this run, in order
    # Rollouts a derived report trained this run, by record id, with their versions: a person's later report on
    # one trains as a correction while it is young enough (training.derived-staleness).
    corrigible: dict[str, tuple[str, ...]] = field(default_factory=dict)


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
        self._staleness = Staleness(self.training.max_staleness, self.training.derived_staleness)
        self._runtime: WeightSwappable | None = None
        self._lora = self.training.adapter == "lora" and self.training.trainer == "torch"
        self._full_trainer: Trainer | None = None  # training.adapter = full: the one model copy that trains
        self._lora_base: LoraBase | None = None  # training.adapter = lora: the base every adapter shares
        self._lines: dict[str, _Line] = {}  # by scenario; with full weights, at most one
        self._bound: str | None = None  # the scenario a Slime run trains
        self._claimed: dict[str, Rollout] = {}  # rollouts waiting in a batch, by record id
        self._rollouts: dict[str, Rollout] = {}  # by report id
        self._superseded: set[str] = set()  # derived reports waiting in a batch whose rollout a person scored since
        self._slime: SlimeRun | None = None
        self._served: ServedVersions | None = None  # full weights, from start: the versions swapped in, for age
        if self.training.trainer == "slime":
            check_ready(settings)  # refused here, before anything starts, with what to install
        self._started = time.time()  # rollouts made before this run by trained weights are not trained on

    @classmethod
    def chosen_settings(cls, settings: Settings) -> dict[str, tuple[str, str]]:
        """The training settings `training_of` gives other values than the defaults (an adapter's learning rate,
        a Slime run's original values)."""
        try:
            used = training_of(settings)
        except SettingsError:
            return {}
        declared = settings.of(TrainingSection)
        why = "a Slime run's full-model values" if used.trainer == "slime" else "a LoRA adapter's rate"
        return {
            f"training.{name.replace('_', '-')}": (str(getattr(used, name)), f"recipe {cls.name}, {why}")
            for name in ("learning_rate", "critic_learning_rate", "critic_warmup_steps")
            if getattr(used, name) != getattr(declared, name)
        }

    @classmethod
    def serving(cls, settings: Settings) -> Serving:
        """The adapters `training.adapter lora` trains (served beside the base); under Slime, its engines."""
        training = settings.of(TrainingSection)
        by_slime = training.trainer == "slime"
        if training.adapter != "lora" or by_slime:
            return Serving(engines_started_by_trainer=by_slime)
        return Serving(AdapterServing(training.lora_rank, tuple(training.lora_target_modules)))

    @classmethod
    def trains_served_model(cls, settings: Settings) -> bool:
        """Full weights and a Slime run train the served model itself; a LoRA adapter leaves the base as it is."""
        training = settings.of(TrainingSection)
        return training.adapter == "full" or training.trainer == "slime"

    async def start(self, context: RecipeContext) -> None:
        runtime = context.runtime
        if not isinstance(runtime, WeightSwappable):
            raise SettingsError(
                f"the {self.name} recipe trains the embedded model; start reef without --inference.upstream-url"
            )
        self._runtime = runtime
        if not self._lora:
            self._served = ServedVersions(runtime.weight_version)
        if self.training.trainer == "slime":
            plan = plan_run(self.settings, REEF_ROOT, node_address())
            self._slime = SlimeRun(plan, self.settings.reef.state_dir / "logs")
            await asyncio.to_thread(self._slime.launch)
            return
        if self._lora and not runtime.serves_adapters:
            raise SettingsError(
                "training.adapter = lora needs an engine that serves LoRA adapters (embedded.engine = torch); the"
                f" {runtime.describe().get('engine', runtime.kind)} engine serves none here: set"
                " training.adapter = full"
            )
        if self._lora:
            self._lora_base = LoraBase(runtime.weights_dir, self.training, training_device(self.training.device))
            await asyncio.to_thread(self._lora_base.load)
        else:
            self._full_trainer = await asyncio.to_thread(
                Trainer, runtime.weights_dir, self.training, self.advantage, self._failed_below()
            )
        for scenario in context.store.scenarios.all():
            last = await context.store.steps.last(scenario.name) if scenario.recipe == self.name else None
            if last is not None:
                line = await self._bind(scenario.name)
                self._say_lost_versions(line, last)
                if not self._lora:
                    break

    def _say_lost_versions(self, line: _Line, last: StepRow) -> None:
        """Warn when the versions trained after the last checkpoint are gone with the restart (full weights are
        checkpointed every training.checkpoint-every steps)."""
        if last["result"] != "selected" or last["release_id"] in (None, line.head):
            return
        log.warning(
            "%s resumes from its last checkpoint (%s, after %d steps): the versions trained after it, up to %s,"
            " were not checkpointed (training.checkpoint-every %d) and are no longer served",
            line.scenario, (line.head or "")[:12], line.trainer.steps_done, last["version"],
            self.training.checkpoint_every,
        )  # fmt: skip

    def _failed_below(self) -> float:
        scale: ScoreScale = {"min": self.settings.reports.score_min, "max": self.settings.reports.score_max}
        return low_score_below(scale)

    def trainer_of(self, scenario: str) -> Trainer | None:
        """The trainer of `scenario` (with LoRA, a fresh adapter for a scenario that has not trained yet); None
        where this process does not train it."""
        line = self._lines.get(scenario)
        if line is not None:
            return line.trainer
        if self._lora_base is not None:
            return self._line(scenario).trainer
        if self._full_trainer is not None and not self._lines:
            return self._full_trainer
        return None

    def _line(self, scenario: str) -> _Line:
        """The scenario's line, made (not yet bound to its checkpoints) on first use."""
        line = self._lines.get(scenario)
        if line is None:
            if self._lora_base is not None:
                policy = self._lora_base.policy(scenario)
                trainer = Trainer(
                    self._lora_base.weights_dir, self.training, self.advantage, self._failed_below(), policy
                )
            else:
                assert self._full_trainer is not None
                trainer = self._full_trainer
            line = self._lines[scenario] = _Line(scenario, trainer)
        return line

    def _serving(self) -> WeightSwappable:
        if self._runtime is None:
            raise RuntimeError(f"the {self.name} recipe is not started")
        return self._runtime

    def _version(self, scenario: str) -> str:
        """The version serving `scenario`: its adapter's with LoRA, else the weights'."""
        serving = self._serving()
        return serving.adapter_version(scenario) if self._lora else serving.weight_version

    def _lineage(self, scenario: str) -> list[str] | None:
        """With LoRA, the versions that served `scenario` this run, oldest first (the base's until it trains)."""
        if not self._lora:
            return None
        line = self._lines.get(scenario)
        current = self._version(scenario)
        lineage = line.lineage if line is not None and line.lineage else []
        return lineage if lineage and lineage[-1] == current else [*lineage, current]

    def _adapter_manifest(self) -> dict[str, Any]:
        return lora_manifest(self.training) if self._lora else {"kind": "full"}

    async def _bind(self, scenario: str) -> _Line:
        """Train this scenario from now on: open its checkpoints and resume from the latest one."""
        line = self._line(scenario)
        if line.checkpoints is not None:
            return line
        repo = CheckpointRepo(self.settings.reef.state_dir / "checkpoints" / scenario)
        await asyncio.to_thread(repo.open)
        line.checkpoints = repo
        latest = await asyncio.to_thread(repo.latest)
        if latest is None:
            manifest = {
                "step": 0, "steps_done": 0, "policy_updates": 0, "note": "the weights as first served",
                "adapter": self._adapter_manifest(),
            }  # fmt: skip
            line.head = await asyncio.to_thread(repo.save, line.trainer.state(), manifest, "base weights")
        else:
            await self._restore(line, latest.release_id)
        line.checkpoint_list = await asyncio.to_thread(repo.history)
        return line

    async def _restore(self, line: _Line, release_id: str) -> str:
        """Load the repository's current checkpoint into the trainer and the server; returns the weight version."""
        assert line.checkpoints is not None
        state, manifest = await asyncio.to_thread(line.checkpoints.read)
        kind = (manifest.get("adapter") or {"kind": "full"})["kind"]
        if kind != self._adapter_manifest()["kind"]:
            raise SettingsError(
                f"the checkpoints of {line.scenario} ({line.checkpoints.root}) hold {kind} weights, and"
                f" training.adapter = {self.training.adapter}: set it to {kind}, or move that folder away"
            )
        weights = line.trainer.load(state, int(manifest["steps_done"]), int(manifest["policy_updates"]))
        version = await self._swap(line, weights)
        line.head = release_id
        log.info("resumed %s from checkpoint %s (step %s)", line.scenario, release_id[:12], manifest["step"])
        return version

    async def _swap(self, line: _Line, weights: dict[str, Any]) -> str:
        began = time.perf_counter()
        policy = line.trainer.policy
        if isinstance(policy, LoraPolicy):
            if not line.lineage:
                line.lineage.append(self._version(line.scenario))
            version = await self._serving().swap_adapter(line.scenario, weights, policy.scale)
            line.lineage.append(version)
        else:
            version = await self._serving().swap_weights(weights)
            if self._served is not None:
                self._served.swapped_in(version)
        line.last_swap_s = time.perf_counter() - began
        return version

    def judge(self, scenario: Scenario, unit: Unit) -> Verdict:
        bound = self._bound or (next(iter(self._lines)) if self._lines and not self._lora else None)
        if bound is not None and scenario.name != bound:
            return Ineligible(
                f"this daemon trains scenario {bound}; with full weights (training.adapter = full), one weight"
                " scenario per process"
            )
        line = self._lines.get(scenario.name)
        waiting = self._derived_waiting(unit)
        claimed = self._claimed.keys() - {waiting.record_id} if waiting is not None else self._claimed.keys()
        verdict, rollout = judge_report(
            unit,
            self._version(scenario.name),
            self._staleness,
            claimed,
            run_started=self._started,
            lineage=self._lineage(scenario.name),
            served=self._served,
            corrigible=line.corrigible if line is not None else {},
        )
        if rollout is not None:
            if waiting is not None:
                self._superseded.add(waiting.report_id)
            self._claimed[rollout.record_id] = rollout
            self._rollouts[rollout.report_id] = rollout
        return verdict

    def _derived_waiting(self, unit: Unit) -> Rollout | None:
        """The rollout a derived report claimed, waiting for its batch, that this person's report would score."""
        if (unit.record.get("source") or PERSON_SOURCE) != PERSON_SOURCE or len(unit.referenced) != 1:
            return None
        waiting = self._claimed.get(unit.referenced[0]["id"])
        return waiting if waiting is not None and waiting.derived else None

    async def step(self, scenario: Scenario, units: list[Unit]) -> StepOutcome:
        rollouts = [self._rollouts.pop(unit.id) for unit in units]
        for rollout in rollouts:
            if self._claimed.get(rollout.record_id) is rollout:
                del self._claimed[rollout.record_id]
        # A derived report a person's report superseded while it waited trains nothing: the person's does.
        superseded = {rollout.report_id for rollout in rollouts} & self._superseded
        self._superseded -= superseded
        rollouts = [rollout for rollout in rollouts if rollout.report_id not in superseded]
        if not rollouts:
            reason = "a person's report on the same rollout superseded each derived report of this batch"
            return StepOutcome("skipped", {"reason": reason}, release_id=self.current_release(scenario.name))
        # A correction's rollout was consumed by the step that trained the derived report on it.
        consumed = tuple(rollout.record_id for rollout in rollouts if not rollout.correction)
        if self._slime is not None:  # Slime trains them and pushes the weights into the engines itself
            self._bound = scenario.name
            handed = await asyncio.to_thread(self._slime.hand_over, rollouts)
            handed_metrics: dict[str, Any] = {"handed_to_slime": handed, "weight_version": self._version(scenario.name)}
            return StepOutcome("selected", handed_metrics, also_consumed=consumed)
        line = await self._bind(scenario.name)
        stale = self._stale(scenario.name, rollouts)
        if stale:
            return StepOutcome("skipped", {"reason": stale}, release_id=line.head, also_consumed=consumed)
        result = await asyncio.to_thread(line.trainer.step, rollouts)
        self._remember_corrigible(line, rollouts)
        metrics = dict(result.metrics)
        corrections = sum(rollout.correction for rollout in rollouts)
        if corrections:
            metrics["corrections"] = corrections
        parent = line.head
        if self._lora:
            metrics["adapter"] = "lora"
        if metrics["policy_updated"]:
            try:
                metrics["weight_version"] = await self._swap(line, result.weights)
            except (RuntimeError, ValueError) as exc:  # the engine refused them: the old weights keep serving
                metrics.update(
                    {
                        "reason": f"the new weights did not reach the engine: {exc}",
                        "weight_version": self._version(scenario.name),
                    }
                )
                return StepOutcome("skipped", metrics, release_id=line.head, also_consumed=consumed)
            metrics["swap_s"] = round(line.last_swap_s or 0.0, 4)
            line.head = metrics["weight_version"]
        else:
            metrics["weight_version"] = self._version(scenario.name)
        if self._checkpoints_now(line, metrics["policy_updated"]):
            line.head = await self._checkpoint(line, metrics)
            metrics["checkpoint"] = line.head
        if not metrics["policy_updated"]:
            # A critic-only step (warm-up, or no advantage to learn from): the served weights are the same, so no
            # version; the trainer's metrics say which.
            return StepOutcome("skipped", metrics, release_id=line.head, also_consumed=consumed)
        return StepOutcome("selected", metrics, line.head, parent, also_consumed=consumed)

    def _checkpoints_now(self, line: _Line, policy_updated: bool) -> bool:
        """Every new adapter version is a checkpoint (a few MB: saveable, restorable, served again after a
        restart); full weights are checkpointed every training.checkpoint-every steps."""
        if self._lora and policy_updated:
            return True
        return line.trainer.steps_done % self.training.checkpoint_every == 0

    def _stale(self, scenario: str, rollouts: list[Rollout]) -> str | None:
        """A batch is dropped whole when any rollout grew too old while it waited."""
        if any(self._too_old(scenario, rollout.versions, rollout.max_lag) for rollout in rollouts):
            return (
                "a rollout became older than training.max-staleness (training.derived-staleness for a derived"
                " report) allows while it waited for its batch"
            )
        return None

    def _too_old(self, scenario: str, versions: tuple[str, ...], max_lag: int) -> bool:
        lineage = self._lineage(scenario)
        if lineage is not None:
            lag = lineage_lag(versions, lineage)
            return lag is None or lag > max_lag
        return stale(versions, self._version(scenario), max_lag, self._served)

    def _remember_corrigible(self, line: _Line, rollouts: list[Rollout]) -> None:
        """Keep the rollouts derived reports just trained; forget those corrected now (a person corrects once) and
        those too old for a correction."""
        for rollout in rollouts:
            if rollout.correction:
                line.corrigible.pop(rollout.record_id, None)
            elif rollout.derived:
                line.corrigible[rollout.record_id] = rollout.versions
        bound, _ = self._staleness.allowed(None, correction=True)
        for record_id, versions in list(line.corrigible.items()):
            if self._too_old(line.scenario, versions, bound):
                del line.corrigible[record_id]

    async def _checkpoint(self, line: _Line, metrics: dict[str, Any]) -> str:
        assert line.checkpoints is not None
        trainer = line.trainer
        manifest = {
            "step": trainer.steps_done,
            "steps_done": trainer.steps_done,
            "policy_updates": trainer.policy_updates,
            "weight_version": metrics["weight_version"],
            "mean_reward": metrics["mean_reward"],
            "adapter": self._adapter_manifest(),
        }
        message = f"checkpoint after {trainer.steps_done} steps"
        release = await asyncio.to_thread(line.checkpoints.save, trainer.state(), manifest, message)
        line.checkpoint_list = await asyncio.to_thread(line.checkpoints.history)
        return release

    async def close(self) -> None:
        if self._slime is not None:
            await asyncio.to_thread(self._slime.stop)

    def current_release(self, scenario: str) -> str | None:
        line = self._lines.get(scenario)
        return line.head if line is not None else None

    async def release_files(self, scenario: Scenario, release_id: str) -> dict[str, bytes]:
        """A LoRA checkpoint as PEFT saves an adapter (`reef versions --save`)."""
        line = self._lines.get(scenario.name)
        repo = line.checkpoints if line is not None else None
        if repo is None:
            repo = CheckpointRepo(self.settings.reef.state_dir / "checkpoints" / scenario.name)
            if not repo.root.is_dir():
                raise NotFound(f"scenario {scenario.name} has no weight checkpoints", type="unknown_release")
            await asyncio.to_thread(repo.open)
        if not await asyncio.to_thread(repo.has, release_id):
            raise Conflict(
                f"release {release_id} is not a checkpoint; only a version with a checkpoint can be saved",
                type="not_restorable",
            )
        state, manifest = await asyncio.to_thread(repo.read, release_id)
        adapter = manifest.get("adapter") or {"kind": "full"}
        if adapter["kind"] != "lora":
            raise Conflict(
                f"release {release_id} holds full weights (training.adapter = full), not a LoRA adapter",
                type="not_an_adapter",
            )
        base = str(self._serving().weights_dir)
        return await asyncio.to_thread(peft_files, state, adapter, base)

    async def rollback(self, scenario: Scenario, release_id: str) -> StepOutcome:
        line = self._lines.get(scenario.name)
        if line is None or line.checkpoints is None:
            raise NotFound(f"scenario {scenario.name} has no weight checkpoints", type="unknown_release")
        repo = line.checkpoints
        if not await asyncio.to_thread(repo.has, release_id):
            raise Conflict(
                f"release {release_id} is not a checkpoint; only releases with a checkpoint can be restored",
                type="not_restorable",
            )
        parent = line.head
        new_release = await asyncio.to_thread(repo.republish, release_id, f"roll back to {release_id}")
        version = await self._restore(line, new_release)
        line.checkpoint_list = await asyncio.to_thread(repo.history)
        metrics = {"weight_version": version, "checkpoint": new_release, "swap_s": round(line.last_swap_s or 0.0, 4)}
        return StepOutcome("selected", metrics, new_release, parent)

    def _shown_line(self) -> _Line | None:
        """The line `reef status` details: the one scenario, or the most recently trained one."""
        bound = [line for line in self._lines.values() if line.checkpoints is not None]
        return max(bound, key=lambda line: line.trainer.steps_done, default=None)

    def status(self) -> RecipeStatus:
        line = self._shown_line()
        trainer = line.trainer if line is not None else self._full_trainer
        status: RecipeStatus = {
            **super().status(),
            "scenario": line.scenario if line is not None else self._bound,
            "head": line.head if line is not None else None,
            "steps_done": trainer.steps_done if trainer else 0,
            "policy_updates": trainer.policy_updates if trainer else 0,
            "trainable_parameters": sum(p.numel() for p in trainer.trainable.values()) if trainer else 0,
            "last_swap_s": line.last_swap_s if line is not None else None,
            "checkpoints": line.checkpoint_list if line is not None else [],
            "sampling": self._sampling(),
            "outcomes": OUTCOME_REASON,
            "weights": self.training.adapter if self.training.trainer == "torch" else "full",
        }
        if self._lora:
            status["adapters"] = {name: other.head for name, other in self._lines.items() if other.checkpoints}
        if trainer is not None and self.advantage == "gae":
            status["critic"] = self._critic_status(trainer)
        return status

    def _critic_status(self, trainer: Trainer) -> CriticStatus:
        """The critic's diagnostics over its recent samples: is it learning?"""
        diagnostics = trainer.diagnostics()
        return {
            "value_min": diagnostics["value_min"],
            "value_max": diagnostics["value_max"],
            "explained_variance": diagnostics["explained_variance"],
            "failed_positive_share": diagnostics["failed_positive_share"],
            "window": diagnostics["critic_window"],
            "warmup_steps_left": max(0, self.training.critic_warmup_steps - trainer.steps_done),
        }

    def _sampling(self) -> str:
        """What on-policy training needs of the defaults, and whether it has it."""
        inference = self.settings.inference
        if inference.temperature == 1.0 and inference.top_p == 1.0:
            return f"{self.name} keeps temperature 1, top-p 1 for exact on-policy ratios"
        return (
            f"{self.name} trains only rollouts sampled at temperature 1, top-p 1; these were set by hand, so an"
            " answer to a request that sets no sampling is not trained on"
        )


class GrpoRecipe(SaoRecipe):
    """The control arm: group-normalised rewards over rollouts of the same prompt, the same DIS mask, no critic."""

    name: ClassVar[str] = "grpo"
    advantage: ClassVar[str] = "grpo"
