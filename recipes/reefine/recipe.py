"""The `reefine` recipe (old name `harness-evolve`): change requests and low scores become harness releases.

One step per unit, oldest first. A change request (`POST /reef/requests`) goes to the agent proposer where its agent
runs here (in the jail, or without one where `harness.sandbox = none`), else to the text proposer; in `auto` and
`hybrid` mode a low-scored report becomes a failure-driven proposal of one skill. Every candidate passes admission
and a render check, then (where the adapter's agent is installed on this host) a trial run that starts the agent
on it with one health prompt, and the evaluation gate (`gate.py`): the served version and the candidate run the
request's behaviour check, the protected tasks and the replays, and a judge compares them; then it is published as
a release (pending review when it touches an extension), its evidence table in the manifest, or recorded as a
rejected or skipped step with the reason.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from adapters import get_adapter
from recipes.reefine.agent_proposer import AgentProposer
from recipes.reefine.agent_run import Bounds
from recipes.reefine.evaluation import EvalBounds
from recipes.reefine.gate import Gate, GateRules
from recipes.reefine.steps import HarnessSteps
from recipes.reefine.trial import TrialRunner, check_trial_setting, trial_binary
from reef_contract import RecipeStatus, RecordType, ReleaseRow, low_score_below
from reef_daemon.recipe_api import (
    NO_SANDBOX,
    Eligible,
    HarnessHost,
    HarnessRecipe,
    Ineligible,
    RecipeContext,
    RequestProgress,
    Runtime,
    Scenario,
    Settings,
    SettingsError,
    StepOutcome,
    Unit,
    Verdict,
    check_sandbox_setting,
    gate_tasks,
)

__all__ = ["ReefineRecipe"]

EMBEDDED_ANSWER_TOKENS = 512
# With the embedded model a proposer run and a gate's evaluation each end within EMBEDDED_WALL_S unless set, so a
# request settles (published, rejected or skipped) inside the 600 s that `reef request --wait` follows it there.
EMBEDDED_WALL_S = 240.0
log = logging.getLogger("reef.reefine")


def _embedded_caps(settings: Settings, key: str) -> bool:
    """The embedded model serves (no upstream) and nobody set `key`."""
    return settings.inference.upstream_url is None and key not in settings.sources


def _embedded_caps_answers(settings: Settings) -> bool:
    return _embedded_caps(settings, "harness.max-tokens")


def _wall_s(settings: Settings, key: str, value: float) -> float:
    """A wall bound (`key`, set to `value`): EMBEDDED_WALL_S with the embedded model unless the person set it."""
    return min(value, EMBEDDED_WALL_S) if _embedded_caps(settings, key) else value


class ReefineRecipe(HarnessRecipe):
    name: ClassVar[str] = "reefine"
    default_training_mode: ClassVar[str] = "manual"
    consumes: ClassVar[tuple[RecordType, ...]] = ("request", "report")
    profile: ClassVar[dict[str, Any]] = {"reef.port": 8901, "reef.state-dir": ".reef/reefine"}

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.harness_settings = harness = settings.harness
        try:
            self.adapter = get_adapter(harness.adapter)
        except ValueError as exc:
            raise SettingsError(f"harness.adapter: {exc}") from None
        problem = check_trial_setting(harness.trial) or check_sandbox_setting(harness.sandbox)
        if problem is not None:
            raise SettingsError(problem)
        self._harness = HarnessHost(settings.reef.state_dir, self.adapter)
        hidden = [settings.reef.state_dir.absolute()]
        self.trial = TrialRunner(self.adapter, harness.trial, harness.trial_timeout_s, harness.sandbox, hidden)
        proposer_wall_s = _wall_s(settings, "harness.proposer-wall-s", harness.proposer_wall_s)
        bounds = Bounds(
            proposer_wall_s, harness.proposer_trial_s, harness.proposer_model_calls, harness.proposer_trials
        )
        self.agent = AgentProposer(
            self.adapter, harness.proposer_agent, harness.sandbox, bounds, hidden, self._trial_agent
        )
        if harness.sandbox == NO_SANDBOX and (harness.trial != "off" or harness.proposer_agent != "off"):
            log.warning(
                "reefine: trial runs and the agent proposer execute WITHOUT a jail (harness.sandbox = none): a "
                "candidate harness, and an agent fed the person's text, run as this user, with the network; use "
                "this only on a trusted machine"
            )
        self._steps: HarnessSteps | None = None
        self.answer_tokens = harness.max_tokens
        self._progress: RequestProgress | None = None

    def _trial_agent(self) -> str | None:
        """The scenario's agent that harness-trial starts: the trial setting's, or the one on PATH."""
        trial = self.harness_settings.trial
        return trial_binary(self.adapter, "auto" if trial == "off" else trial)[0]

    @property
    def harness(self) -> HarnessHost:
        return self._harness

    @property
    def progress(self) -> RequestProgress:
        if self._progress is None:
            raise RuntimeError("the reefine recipe is not started")
        return self._progress

    async def start(self, context: RecipeContext) -> None:
        store, runtime = context.store, context.runtime
        self.harness.open(store)
        self._progress = context.progress
        model = self.settings.inference.upstream_model or str(runtime.describe().get("model") or "reef")
        self.answer_tokens = self._answer_tokens(runtime)
        harness = self.harness_settings
        eval_wall_s = _wall_s(self.settings, "harness.eval-wall-s", harness.eval_wall_s)
        bounds = EvalBounds(eval_wall_s, harness.eval_model_calls, harness.gate_judge)
        rules = GateRules(
            harness.gate_max_worse, harness.replays, self.settings.reports.sources, bounds, harness.eval_parallel
        )
        gate = Gate(self.trial, model, rules, gate_tasks)
        self._steps = HarnessSteps(
            self.harness, self._progress, runtime, model, self.answer_tokens, self.trial, self.agent, gate
        )
        for scenario in store.scenarios.all():
            if scenario.recipe == self.name:
                await self.harness.served(scenario.name)

    @classmethod
    def chosen_settings(cls, settings: Settings) -> dict[str, tuple[str, str]]:
        why = "recipe reefine, for the embedded model"
        chosen = {}
        if _embedded_caps_answers(settings):
            chosen["harness.max-tokens"] = (str(EMBEDDED_ANSWER_TOKENS), why)
        for key in ("harness.proposer-wall-s", "harness.eval-wall-s"):
            if _embedded_caps(settings, key):
                chosen[key] = (f"{EMBEDDED_WALL_S:g}", why)
        return chosen

    def _answer_tokens(self, runtime: Runtime) -> int:
        """`harness.max-tokens`; unless set, the embedded model (tens of tokens a second on a CPU) writes at most
        EMBEDDED_ANSWER_TOKENS, so a request settles in minutes rather than an hour."""
        if runtime.describe().get("kind") == "embedded" and _embedded_caps_answers(self.settings):
            log.info(
                "reefine: the embedded model writes proposer answers of at most %d tokens; set harness.max-tokens "
                "to change that",
                EMBEDDED_ANSWER_TOKENS,
            )
            return EMBEDDED_ANSWER_TOKENS
        return self.harness_settings.max_tokens

    def listening(self, context: RecipeContext) -> None:
        self.trial.listening(context)
        self.agent.listening(context)

    async def close(self) -> None:
        self.harness.close()

    def judge(self, scenario: Scenario, unit: Unit) -> Verdict:
        """Every change request is a unit; a report is one only in auto/hybrid mode, low-scored, on fresh records."""
        if unit.record["type"] == "request":
            return Eligible()
        if scenario.training_mode == "manual":
            return Ineligible("manual mode: scores are kept, only change requests start a step")
        score = unit.record["score"]
        if score is None:
            return Ineligible("the report has no score")
        below = low_score_below({"min": self.settings.reports.score_min, "max": self.settings.reports.score_max})
        if score >= below:
            return Ineligible(f"score {below:g} or more: nothing to fix")
        fresh = [row for row in unit.referenced if row["type"] == "inference"]
        if not fresh or any(row["consumed_by_step"] is not None for row in fresh):
            return Ineligible("the report's conversations were already used by a step")
        return Eligible()

    async def step(self, scenario: Scenario, units: list[Unit]) -> StepOutcome:
        if self._steps is None:
            raise RuntimeError("the reefine recipe is not started")
        (unit,) = units
        if unit.record["type"] == "request":
            return await self._steps.for_request(scenario.name, unit)
        return await self._steps.from_failure(scenario.name, unit)

    def current_release(self, scenario: str) -> str | None:
        return self.harness.cached_head(scenario)

    async def promote(self, scenario: Scenario, release_id: str) -> StepOutcome:
        return await self._republish(scenario, "promote", release_id)

    async def rollback(self, scenario: Scenario, release_id: str) -> StepOutcome:
        return await self._republish(scenario, "rollback", release_id)

    async def _republish(self, scenario: Scenario, operation: str, release_id: str) -> StepOutcome:
        new_id, parent, version = await self.harness.republish(scenario.name, operation, release_id)
        return StepOutcome("selected", {"source_version": version}, release_id=new_id, parent_release_id=parent)

    async def describe_releases(self, scenario: Scenario, steps: list[ReleaseRow]) -> list[ReleaseRow]:
        return await self.harness.catalog(scenario.name, steps)

    def status(self) -> RecipeStatus:
        return {
            **super().status(),
            "adapter": self.adapter.name,
            "answer_tokens": self.answer_tokens,
            "trial": self.trial.describe(),
            "proposer": self.agent.describe(),
        }
