"""The recipe interface: what the daemon calls on a recipe (`Recipe`, `HarnessRecipe`), what it hands one (the
`RecipeContext`, records as `Unit`s) and what it gets back (a `Verdict`, a `StepOutcome`, what to `Serving`). The
daemon's own parts import this module; a recipe imports `recipe_api`, which offers this and the recipe toolkit."""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from reef_contract import RecipeStatus, RecordType, ReleaseRow, StoredRecord
from reef_daemon.errors import Unsupported
from reef_daemon.harness.host import HarnessHost
from reef_daemon.harness.progress import RequestProgress
from reef_daemon.runtimes.base import Runtime
from reef_daemon.settings import Settings
from reef_daemon.store import Scenario
from reef_daemon.store.view import StoreView


@dataclass(frozen=True)
class Eligible:
    """The record is a unit the recipe will train on: it waits for a full batch, then goes to `step`."""


@dataclass(frozen=True)
class Ineligible:
    """The record will never be trained on. `reason` is stored, and counted per reason in `/reef/status`."""

    reason: str


Verdict = Eligible | Ineligible


class ReferencedRecord(StoredRecord):
    """A record a report references, in full, with the step that consumed it (None while no step has)."""

    consumed_by_step: int | None


@dataclass(frozen=True)
class Unit:
    """A record the recipe worker hands a recipe, to `judge` and then (if eligible) to `step`.

    Attributes:
        record: the stored record, with the contract's field names (`id`, `type`, `score`, `references`, `text` ...).
        referenced: for a report, the records it references, in its order; empty for any other record.
    """

    record: StoredRecord
    referenced: tuple[ReferencedRecord, ...] = ()

    @property
    def id(self) -> str:
        """The record's id."""
        return self.record["id"]


@dataclass(frozen=True)
class StepOutcome:
    """What a step (or a promote or rollback) produced; the daemon commits it as the scenario's next step.

    Attributes:
        result: `selected` (a release now serves), `pending` (a release waits for a person's promote),
            `rejected` (a candidate was made and refused) or `skipped` (nothing was made).
        metrics: JSON-serialisable facts about the step, shown with it (`reason` is shown as the why).
        release_id: the release the step made or now serves, if any.
        parent_release_id: the release it was built on, if any.
        request_id: the change request (a `request` record) the step answered, if any.
        also_consumed: records the step used besides its units (the rollouts a report scored); they are never
            handed to a step again.
    """

    result: str
    metrics: dict[str, Any] = field(default_factory=dict)
    release_id: str | None = None
    parent_release_id: str | None = None
    request_id: str | None = None
    also_consumed: tuple[str, ...] = ()


class TokenLender(Protocol):
    """The daemon's token gate, as a recipe uses it: it lends tokens to the processes the recipe starts."""

    def lend(self, scenario: str) -> AbstractContextManager[str | None]:
        """A fresh token good only for model calls recorded in `scenario`, until the `with` block ends.

        Args:
            scenario: the scenario the borrower's model calls are recorded in.

        Returns:
            A context manager giving the token, or None when the daemon's auth is off (none is needed). A process
            the recipe starts is given this token, never the daemon's own.
        """
        ...


class RecipeContext:
    """What the daemon lends a recipe: built once, handed to `start` and again (its `url` set) to `listening`.

    Attributes:
        store: the open store, as a recipe reads it (scenarios, records, steps, evaluation tasks). Steps are
            committed by the recipe worker, never by the recipe.
        runtime: the started runtime that serves the model; a recipe that swaps weights checks
            `isinstance(context.runtime, WeightSwappable)`.
        settings: the daemon's settings as the recipe was built with them (`settings.of(Section)`).
        gate: lends short-lived model-call tokens to the recipe's processes (`with context.gate.lend(s) as token`).
        progress: where each change request stands; a harness recipe writes to it while a step works on one.

    The sandbox is not lent: which one runs (`harness.sandbox`) is a recipe's own setting, checked when it is built
    (`check_sandbox_setting`), and the jail is made with the functions exported here (`jail_argv`, `needed_paths`,
    `model_endpoint`), hiding at least the daemon's state (`settings.reef.state_dir`).
    """

    def __init__(
        self,
        store: StoreView,
        runtime: Runtime,
        settings: Settings,
        gate: TokenLender,
        progress: RequestProgress,
    ) -> None:
        self.store = store
        self.runtime = runtime
        self.settings = settings
        self.gate = gate
        self.progress = progress
        self._url: str | None = None

    @property
    def url(self) -> str | None:
        """The daemon's loopback URL, for processes the recipe starts itself; None until the daemon listens."""
        return self._url

    def listens_at(self, url: str) -> None:
        """Called by the daemon once it accepts connections at `url`, before `Recipe.listening`."""
        self._url = url


@dataclass(frozen=True)
class AdapterServing:
    """LoRA adapters the runtime will serve: the largest rank and the modules they adapt."""

    rank: int
    target_modules: tuple[str, ...]


@dataclass(frozen=True)
class Serving:
    """What a recipe asks of the serving runtime at launch (`Recipe.serving`)."""

    adapters: AdapterServing | None = None
    engines_started_by_trainer: bool = False  # a Slime run starts the SGLang engines; reef attaches to them


class Recipe(ABC):  # noqa: B024 - every method has a default: the base itself is the `record` recipe
    """Base of every recipe. As it stands it records traffic and never trains; override what the recipe does.

    Class attributes:
        name: the recipe's name, stored with each scenario it serves.
        default_training_mode: a new scenario's mode: `auto` (scores start steps), `manual` (only change
            requests do) or `hybrid` (both).
        consumes: the record types the recipe learns from (`report`, `request`); empty means it never trains.
        profile: settings the recipe changes from reef's defaults, e.g. `{"reef.port": 8901}`; anything the user
            sets wins.
        keeps_releases: the recipe keeps what it makes (harness releases, checkpoints) under the daemon's
            `reef.state-dir`; daemons sharing a store then train each scenario only on the daemon whose state
            directory holds its history, rather than fork it.
    """

    name: ClassVar[str] = "recipe"
    keeps_releases: ClassVar[bool] = False
    default_training_mode: ClassVar[str] = "auto"
    consumes: ClassVar[tuple[RecordType, ...]] = ()
    profile: ClassVar[dict[str, Any]] = {}

    def __init__(self, settings: Settings) -> None:
        """Build the recipe; nothing is open or listening yet.

        Args:
            settings: the daemon's settings, the recipe's profile applied.

        Raises:
            SettingsError: a setting the recipe cannot work with; `reef serve` prints it and exits.
        """
        self.settings = settings
        # How many eligible units `step` receives at once.
        self.batch_size = 1

    @classmethod
    def chosen_settings(cls, settings: Settings) -> dict[str, tuple[str, str]]:
        """Settings the recipe replaces when it runs, for `--print-config` to show the value in use.

        Args:
            settings: the daemon's settings, the recipe's profile applied.

        Returns:
            Setting key -> (the value in use, as shown; why the recipe chose it). Empty by default.
        """
        return {}

    @classmethod
    def serving(cls, settings: Settings) -> Serving:
        """What the serving runtime must know of this recipe before it starts (an SGLang server reef launches is
        told then): the LoRA adapters it will load, and whether the recipe's trainer starts the engines itself.
        Nothing by default.

        Args:
            settings: the daemon's settings, the recipe's profile applied.
        """
        return Serving()

    @classmethod
    def trains_served_model(cls, settings: Settings) -> bool:
        """Whether a step changes the weights the runtime serves every request (full weights, a Slime run), so the
        served model is the very policy the recipe trains and may not be its judge. False by default: the recipe
        trains no weights, or an adapter per scenario on a frozen base.

        Args:
            settings: the daemon's settings, the recipe's profile applied.
        """
        return False

    @property
    def trains(self) -> bool:
        """Whether the recipe learns at all (it consumes some record type)."""
        return bool(self.consumes)

    async def start(self, context: RecipeContext) -> None:  # noqa: B027 - optional
        """Open what the recipe needs, before the first record is judged.

        Args:
            context: what the daemon lends the recipe: `context.store` (open), `context.runtime` (started),
                `context.settings`, `context.gate`, `context.progress`; `context.url` is None until `listening`.

        Raises:
            SettingsError: the recipe cannot run with this runtime; the daemon does not start.
        """

    def listening(self, context: RecipeContext) -> None:  # noqa: B027 - optional
        """The daemon now accepts connections.

        Args:
            context: the context `start` was given, `context.url` now the daemon's loopback URL, for processes the
                recipe starts itself (with a token from `context.gate`).
        """

    async def close(self) -> None:  # noqa: B027 - optional
        """Release what `start` opened; called after the HTTP server and the recipe worker stopped."""

    def judge(self, scenario: Scenario, unit: Unit) -> Verdict:
        """Decide whether a record is a unit to train on. Called once per record, in sequence order.

        Args:
            scenario: the record's scenario.
            unit: the stored record, and for a report the records it references, each with `consumed_by_step`
                (the step that consumed it, or None).

        Returns:
            `Eligible()`, or `Ineligible(reason)`.
        """
        return Ineligible(f"the {self.name} recipe does not train")

    async def step(self, scenario: Scenario, units: list[Unit]) -> StepOutcome:
        """Train on one batch of eligible units.

        Args:
            scenario: the units' scenario.
            units: `batch_size` units `judge` found eligible, oldest first.

        Returns:
            What the step produced; the daemon commits it with the units as consumed.

        Raises:
            Exception: any error makes the step a `skipped` one that still consumes the units (so a bad unit is
                never retried forever); the error is shown in `/reef/status`.
        """
        raise Unsupported(f"the {self.name} recipe does not train")

    def current_release(self, scenario: str) -> str | None:
        """The release this scenario serves now, if the recipe publishes releases.

        Args:
            scenario: the scenario's name.

        Returns:
            The release id, or None.
        """
        return None

    async def promote(self, scenario: Scenario, release_id: str) -> StepOutcome:
        """Serve a release that waits for review (a `pending` step's).

        Args:
            scenario: the scenario.
            release_id: the release to serve.

        Returns:
            The outcome committed as a `promote` step.

        Raises:
            ReefError: a subclass (`NotFound`, `Conflict`, `BadRequest`) answers the person's request with its
                status and message; the default raises `Unsupported` (501).
        """
        raise Unsupported(f"the {self.name} recipe has no releases to promote")

    async def rollback(self, scenario: Scenario, release_id: str) -> StepOutcome:
        """Serve an earlier release again. History is never rewritten: this is a new step.

        Args:
            scenario: the scenario.
            release_id: the release to serve again.

        Returns:
            The outcome committed as a `rollback` step.

        Raises:
            ReefError: as for `promote`; the default raises `Unsupported` (501).
        """
        raise Unsupported(f"the {self.name} recipe has no releases to roll back to")

    async def release_files(self, scenario: Scenario, release_id: str) -> dict[str, bytes]:
        """A release's files in a layout other tools load as they are (`reef versions --save`).

        Args:
            scenario: the scenario.
            release_id: one of its releases.

        Returns:
            File name -> content.

        Raises:
            ReefError: as for `promote`; the default raises `Unsupported` (501).
        """
        raise Unsupported(f"the {self.name} recipe has no release files to save")

    async def describe_releases(self, scenario: Scenario, steps: list[ReleaseRow]) -> list[ReleaseRow]:
        """The rows `GET /reef/scenarios/{s}/releases` lists.

        Args:
            scenario: the scenario.
            steps: its committed steps, newest first.

        Returns:
            The rows to list; by default the steps as they are.
        """
        return steps

    def status(self) -> RecipeStatus:
        """What `/reef/status` shows under `recipe`: at least `name` and `trains`."""
        return {"name": self.name, "trains": self.trains}


class HarnessRecipe(Recipe):
    """A recipe that evolves an agent harness: the harness routes (`/reef/harness*`, `/reef/requests*`,
    `/reef/train`) serve only when the deployment's recipe is one; otherwise they answer 501.

    Its parts are the daemon's, exported here: `HarnessHost(state_dir, adapter)` keeps the releases (opened with
    `context.store` in `start`), `context.progress` is the requests' progress, and `admit` is the check every
    proposed change must pass.
    """

    keeps_releases: ClassVar[bool] = True  # the release repository is under reef.state-dir

    def status(self) -> RecipeStatus:
        """The recipe's status, saying it evolves a harness (`harness: true`), so takes change requests."""
        return {**super().status(), "harness": True}

    @property
    @abstractmethod
    def harness(self) -> HarnessHost:
        """The deployment's harness: its adapter, its release repository and the served release of each scenario.

        Returns:
            A `HarnessHost` the recipe built and opened in `start`.
        """

    @property
    @abstractmethod
    def progress(self) -> RequestProgress:
        """Where each change request stands, for `GET /reef/requests/{id}`.

        Returns:
            The `RequestProgress` the recipe writes to while a step works on a request.

        Raises:
            RuntimeError: before `start`.
        """
