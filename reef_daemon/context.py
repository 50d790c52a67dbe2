"""The daemon's parts, built once and shared by every route through `app[DAEMON]`."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from reef_contract import INTERNAL_SCENARIOS, DaemonState, did_you_mean, loopback_url
from reef_daemon.auth import TokenGate
from reef_daemon.events import EventBus
from reef_daemon.recipe_interface import Recipe, RecipeContext
from reef_daemon.recipe_worker import RecipeWorkers
from reef_daemon.reports import ReportValidator
from reef_daemon.reports.judge import JudgeModel
from reef_daemon.reports.next_turn import NextTurnSignals
from reef_daemon.runtimes.base import Runtime
from reef_daemon.settings import Settings, with_live_values
from reef_daemon.store import Scenario, Store
from reef_daemon.telemetry import PriceTable

if TYPE_CHECKING:  # the SDK is imported only where export is configured
    from reef_daemon.telemetry._export import TelemetryExport


@dataclass
class Daemon:
    settings: Settings
    store: Store
    bus: EventBus
    runtime: Runtime
    recipe: Recipe
    gate: TokenGate
    reports: ReportValidator
    workers: RecipeWorkers
    # What the recipe is lent, the same object for `start` and `listening`.
    lent: RecipeContext
    prices: PriceTable  # what each exchange cost (telemetry.prices)
    started_at: float = field(default_factory=time.time)
    # Streams being relayed, so a shutdown can bound how long it waits for them; set once it has begun.
    relays: set[asyncio.Task[Any]] = field(default_factory=set)
    stopping: bool = False
    # The judge model (set on start-up), and the judge of answers by the user's next message when
    # `reports.next-turn` is on.
    judge: JudgeModel | None = None
    next_turn: NextTurnSignals | None = None
    telemetry: TelemetryExport | None = None  # None while nothing is exported

    def unlike_a_new_name(self, name: str) -> str | None:
        """When `name` is not a scenario yet but is close to one (a typo in x-reef-scenario makes a new scenario
        otherwise silently): what a request that makes it is told, and the log says; None otherwise."""
        if self.store.scenarios.get(name) is not None:
            return None
        known = [scenario.name for scenario in self.store.scenarios.all() if scenario.name not in INTERNAL_SCENARIOS]
        hint = did_you_mean(name, known)
        return f"made new scenario '{name}'{hint}" if hint else None

    async def ensure_scenario(self, name: str) -> Scenario:
        """The scenario, created with the deployment's recipe on first sight."""
        scenario = self.store.scenarios.get(name)
        if scenario is not None:
            return scenario
        scenario, _created = await self.store.scenarios.ensure(
            name, self.recipe.name, self.recipe.default_training_mode
        )
        return scenario

    def listening(self, port: int) -> str:
        """The loopback URL the daemon answers on, once it listens on `port`; the recipe is told too."""
        url = loopback_url(self.settings.reef.host, port)
        self.store.listening_at(url)
        self.lent.listens_at(url)
        self.recipe.listening(self.lent)
        return url

    def apply_settings(self, fresh: Settings) -> None:
        """Take the settings that can change while running (tokens, the upstream) from freshly loaded ones."""
        merged = with_live_values(self.settings, fresh)
        self.runtime.reconfigure(merged)
        self.gate.replace(merged.accepted_tokens)
        if self.judge is not None:
            self.judge.reconfigure(merged.reports)
        if self.next_turn is not None:
            self.next_turn.reconfigure(merged.reports)
        self.settings = merged

    def status(self) -> DaemonState:
        return {
            "uptime_s": round(time.time() - self.started_at, 3),
            "recipe": self.recipe.status(),
            "runtime": self.runtime.describe(),
            "auth": self.gate.enabled,
            "client_auth": self.settings.inference.client_auth,
            "upstream_key": bool(self.settings.inference.upstream_api_key),
            "state_dir": str(self.settings.reef.state_dir),
            "errors": [*filter(None, [self.runtime.failure()]), *self.workers.errors()],
        }


DAEMON = web.AppKey("reef.daemon", Daemon)
