"""A recipe for tests of the recipe worker: steps on pairs of scored single-receipt reports, learns nothing.

Written from `reef_daemon.recipe_api` alone, as a recipe outside reef would be.
"""

from __future__ import annotations

from typing import Any, ClassVar

from reef_daemon.recipe_api import (
    Eligible,
    Ineligible,
    Recipe,
    RecipeContext,
    Scenario,
    Settings,
    StepOutcome,
    Unit,
    Verdict,
)

STEPS_TAKEN: list[list[str]] = []
LENT: list[tuple[str, RecipeContext]] = []  # ("start" or "listening", the context the daemon lent)


class CountingRecipe(Recipe):
    name: ClassVar[str] = "counting"
    consumes: ClassVar[tuple[str, ...]] = ("report",)

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.batch_size = 2

    async def start(self, context: RecipeContext) -> None:
        LENT.append(("start", context))

    def listening(self, context: RecipeContext) -> None:
        LENT.append(("listening", context))

    def judge(self, scenario: Scenario, unit: Unit) -> Verdict:
        if unit.record["score"] is None:
            return Ineligible("the report has no score")
        if len(unit.referenced) != 1:
            return Ineligible("the report must reference exactly one receipt")
        return Eligible()

    async def step(self, scenario: Scenario, units: list[Unit]) -> StepOutcome:
        if any(unit.record.get("feedback") == "explode" for unit in units):
            raise RuntimeError("the step blew up")
        STEPS_TAKEN.append([unit.id for unit in units])
        mean = sum(float(unit.record["score"] or 0.0) for unit in units) / len(units)
        return StepOutcome("selected", {"mean_reward": mean}, release_id=f"weights-{len(STEPS_TAKEN)}")

    async def rollback(self, scenario: Scenario, release_id: str) -> StepOutcome:
        return StepOutcome("selected", {"restored": release_id}, release_id=f"{release_id}-restored")


class ReleasingRecipe(CountingRecipe):
    """The counting recipe, as if it kept releases under the daemon's state directory (as reefine and SAO do)."""

    name: ClassVar[str] = "releasing"
    keeps_releases: ClassVar[bool] = True


class ProfiledRecipe(Recipe):
    """A recipe with its own profile of defaults, like the harness recipe's port and state directory."""

    name: ClassVar[str] = "profiled"
    profile: ClassVar[dict[str, Any]] = {"reef.port": 8901, "reef.state-dir": ".reef/profiled"}
