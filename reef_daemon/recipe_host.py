"""Recipes: what reef does with scored records (nothing, train weights, or evolve a harness).

A recipe is resolved by a built-in name or a dotted reference `package.module:Class`. Requests never choose one:
every scenario is bound to the deployment's recipe when it is created. A recipe that learns names the record types
it consumes; the recipe worker (`recipe_worker.py`) hands it those records in order, asks `judge` whether each is
eligible, and calls `step` with batches of eligible ones, committing each step with the records it consumed.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from reef_daemon.auth import TokenGate
from reef_daemon.contract import RecipeStatus, ReleaseRow
from reef_daemon.errors import Unsupported
from reef_daemon.runtimes.base import Runtime
from reef_daemon.settings import Settings, SettingsError, load_settings
from reef_daemon.store import Scenario, Store

# Built-in names. Anything else must be a dotted reference `package.module:Class`.
BUILTIN_RECIPES: dict[str, str] = {
    "record": "recipes.record:RecordRecipe",
    "reefine": "recipes.reefine:ReefineRecipe",
    "harness-evolve": "recipes.reefine:ReefineRecipe",
    "sao": "recipes.sao:SaoRecipe",
    "grpo": "recipes.sao:GrpoRecipe",
}
# Old names still accepted; `reef serve` says which name replaced them.
RENAMED_RECIPES: dict[str, str] = {"harness-evolve": "reefine"}
_DOTTED = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


@dataclass(frozen=True)
class Eligible:
    """The record is a unit the recipe will train on."""


@dataclass(frozen=True)
class Ineligible:
    """The record will never be trained on; the reason is stored and shown per record and in `/reef/status`."""

    reason: str


Verdict = Eligible | Ineligible


@dataclass(frozen=True)
class StepOutcome:
    """What a step produced. `result`: selected | rejected | skipped | pending."""

    result: str
    metrics: dict[str, Any] = field(default_factory=dict)
    release_id: str | None = None
    parent_release_id: str | None = None
    request_id: str | None = None
    # Records the step used besides its units (the rollouts a report scored): they can never be consumed again.
    also_consumed: tuple[str, ...] = ()


class Recipe:
    """Base of every recipe. The default records traffic and never trains."""

    name: ClassVar[str] = "recipe"
    default_training_mode: ClassVar[str] = "auto"
    # Record types this recipe learns from ("report", "train"); none means it never trains.
    consumes: ClassVar[tuple[str, ...]] = ()
    # Settings this recipe changes from the defaults, e.g. {"reef.port": 8901}; anything the user sets wins.
    profile: ClassVar[dict[str, Any]] = {}

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.batch_size = 1

    @property
    def trains(self) -> bool:
        return bool(self.consumes)

    async def start(self, store: Store, runtime: Runtime) -> None:
        """Called once the store is open and the runtime started, before the recipe worker starts."""

    def listening(self, url: str, gate: TokenGate) -> None:
        """Called once the daemon listens: its loopback URL, and the gate that lends model-call tokens to the
        processes a recipe starts itself."""

    async def close(self) -> None:
        """Called on shutdown, after the HTTP server stopped taking requests and the worker stopped."""

    def judge(self, scenario: Scenario, record: dict[str, Any]) -> Verdict:
        """Is this record (a full row, as `GET /reef/records/{id}` shows it) a unit to train on?

        A report's row also carries `referenced`: the full rows of the records it references, each with
        `consumed_by` (the step that consumed it, or None).
        """
        return Ineligible(f"the {self.name} recipe does not train")

    async def step(self, scenario: Scenario, units: list[dict[str, Any]]) -> StepOutcome:
        """Run one step on `batch_size` eligible units. Raising makes the step a skipped one that consumes them."""
        raise Unsupported(f"the {self.name} recipe does not train")

    def current_release(self, scenario: str) -> str | None:
        """The release this scenario serves now, if the recipe publishes releases."""
        return None

    async def promote(self, scenario: Scenario, release_id: str) -> StepOutcome:
        raise Unsupported(f"the {self.name} recipe has no releases to promote")

    async def rollback(self, scenario: Scenario, release_id: str) -> StepOutcome:
        raise Unsupported(f"the {self.name} recipe has no releases to roll back to")

    async def describe_releases(self, scenario: Scenario, steps: list[ReleaseRow]) -> list[ReleaseRow]:
        """The rows `GET /reef/scenarios/{s}/releases` lists, from the committed steps (newest first)."""
        return steps

    def status(self) -> RecipeStatus:
        return {"name": self.name, "trains": self.trains}


def load_serving_settings(
    *, config_file: Path | None, overrides: Mapping[str, Any], environ: Mapping[str, str]
) -> Settings:
    """Settings for `reef serve`: as the user gave them, over the profile of the recipe they name."""
    plain = load_settings(config_file=config_file, overrides=overrides, environ=environ)
    if plain.recipe in RENAMED_RECIPES:
        print(f"reef: recipe '{plain.recipe}' is the old name of '{RENAMED_RECIPES[plain.recipe]}'", file=sys.stderr)
    profile = resolve_recipe(plain.recipe).profile
    if not profile:
        return plain
    return load_settings(config_file=config_file, overrides=overrides, environ=environ, profile=profile)


def resolve_recipe(reference: str) -> type[Recipe]:
    """The recipe class named by a built-in name or `package.module:Class`; SettingsError otherwise."""
    target = BUILTIN_RECIPES.get(reference, reference)
    if not _DOTTED.fullmatch(target):
        raise SettingsError(
            f"unknown recipe '{reference}'; accepted: {', '.join(BUILTIN_RECIPES)}, or package.module:Class"
        )
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SettingsError(f"cannot import recipe module '{module_name}': {exc}") from None
    found = getattr(module, class_name, None)
    if not (isinstance(found, type) and issubclass(found, Recipe)):
        raise SettingsError(f"'{target}' is not a recipe class (a subclass of reef_daemon.recipe_host.Recipe)")
    return found
