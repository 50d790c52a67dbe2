"""The recipe worker: per scenario, reads new records in sequence order, asks the recipe which are eligible, runs
steps on batches of them, and commits each step with the records it consumed.

Durability: the scenario's read position and its consumed set are committed with each step (and with each
ineligible verdict), so a record is trained on at most once and a restart resumes where the last commit ended.
Eligible records waiting for a full batch stay after the read position and are read again after a restart.

Daemons that share a store run each scenario's worker on one of them at a time: the one that holds its lease
(store/leases.py). The others wait, trying for the lease, and the first to get it after its holder died resumes
from the durable read position, as a restart does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from reef_contract import (
    EVENT_RECORD_TYPES,
    PERSON_SOURCE,
    RECORD_EVENTS,
    ScenarioTraining,
    StepRow,
)
from reef_daemon.errors import Conflict
from reef_daemon.events import EventBus, Subscription
from reef_daemon.recipe_host import consumed_types
from reef_daemon.recipe_interface import Ineligible, Recipe, ReferencedRecord, StepOutcome, Unit
from reef_daemon.store import Scenario, StepCommit, Store
from reef_daemon.store.engines.leases import LEASE_RETRY_S

log = logging.getLogger("reef.recipe")


class LeaseLost(Exception):
    """Another daemon may run this scenario's worker now (this one lost its connection to the store)."""


class ScenarioWorker:
    def __init__(self, recipe: Recipe, store: Store, scenario: str) -> None:
        self._recipe = recipe
        self._store = store
        self.scenario = scenario
        self._wake = asyncio.Event()
        self._wake.set()
        self._consumes = consumed_types(recipe)
        self.buffered: list[Unit] = []
        self.running_since: float | None = None
        self.last_error: str | None = None
        self.runs_here = not store.leases.shared  # holds the scenario's lease (always, on a store of its own)
        # Held while a step runs; release changes (promote, rollback) take it too, so they never interleave.
        self.lock = asyncio.Lock()

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        leases = self._store.leases
        while True:
            if await leases.take(self.scenario) and await self._history_is_here():
                break
            await asyncio.sleep(LEASE_RETRY_S)  # another daemon runs it: try to take over in a moment
        self.runs_here = True
        self.buffered.clear()  # a unit left waiting by a lost lease is read again from the durable position
        seen = await self._store.steps.cursor(self.scenario)
        self._wake.set()
        while True:
            await self._wake.wait()
            self._wake.clear()
            if leases.shared and not await leases.holds(self.scenario):
                self.runs_here = False
                raise LeaseLost(self.scenario)
            seen = await self._drain(seen)

    async def _history_is_here(self) -> bool:
        """A recipe that keeps releases under the state directory trains a scenario only where its history is:
        a daemon with another state directory gives the lease back rather than fork that history."""
        if not (self._store.leases.shared and self._recipe.keeps_releases):
            return True
        home = await self._store.steps.release_home(self.scenario, self._store.home)
        if home == self._store.home:
            return True
        self.last_error = (
            f"its releases are kept at {home}, not in this daemon's state directory; it trains on that daemon only"
        )
        await self._store.leases.give_back(self.scenario)
        return False

    async def _drain(self, seen: int) -> int:
        while True:
            rows = await self._store.steps.pending(self.scenario, seen, self._consumes)
            if not rows:
                return seen
            scenario = self._store.scenarios.get(self.scenario)
            if scenario is None:  # archived meanwhile
                return seen
            refused: list[tuple[str, str]] = []
            distrusted = await self._store.trust.distrusted(self.scenario)
            for row in rows:
                referenced = await self._referenced(row.get("references", [])) if row["type"] == "report" else ()
                unit = Unit(row, referenced)
                verdict = self._not_counted(unit, distrusted) or self._recipe.judge(scenario, unit)
                if isinstance(verdict, Ineligible):
                    refused.append((unit.id, verdict.reason))
                else:
                    self.buffered.append(unit)
                seen = row["sequence"]
            if refused:
                await self._store.steps.mark_ineligible(self.scenario, refused, self._durable_position(seen))
            while len(self.buffered) >= self._recipe.batch_size:
                await self._step(scenario, seen)

    def _not_counted(self, unit: Unit, distrusted: dict[str, str]) -> Ineligible | None:
        """Why a report does not reach the recipe at all: its source is switched off (`reports.sources`) or
        distrusted in the scenario (its agreement with people fell too low), or it is derived and a person scored
        the same exchange (a person's report always wins)."""
        if unit.record["type"] != "report":
            return None
        sources = self._recipe.settings.reports.sources
        source = unit.record.get("source") or PERSON_SOURCE
        if source not in sources:
            return Ineligible(f"reports from {source} are switched off (reports.sources)")
        if source in distrusted:
            return Ineligible(f"reports from {source} no longer count in this scenario: {distrusted[source]}")
        person = any(record.get("source") == PERSON_SOURCE for record in unit.referenced)
        if source != PERSON_SOURCE and PERSON_SOURCE in sources and person:
            return Ineligible(f"a person scored this exchange; their report counts, not this {source} one")
        return None

    async def _referenced(self, references: list[str]) -> tuple[ReferencedRecord, ...]:
        consumed = await self._store.steps.consumed_by(references)
        rows: list[ReferencedRecord] = []
        for reference in references:
            row = await self._store.records.get(reference)
            rows.append({**row, "consumed_by_step": consumed.get(reference)})
        return tuple(rows)

    def _durable_position(self, seen: int) -> int:
        """Everything up to here is decided: consumed or ineligible. Buffered units stay after it."""
        return self.buffered[0].record["sequence"] - 1 if self.buffered else seen

    async def _step(self, scenario: Scenario, seen: int) -> None:
        size = self._recipe.batch_size
        units, self.buffered = self.buffered[:size], self.buffered[size:]
        async with self.lock:
            started = time.perf_counter()
            self.running_since = time.time()
            try:
                outcome = await self._recipe.step(scenario, units)
            except Exception as exc:  # a failing unit is consumed as a skipped step, never retried forever
                log.exception("a step of %s failed", self.scenario)
                self.last_error = f"{type(exc).__name__}: {exc}"
                outcome = StepOutcome("skipped", {"error": self.last_error})
            finally:
                self.running_since = None
            metrics = {**outcome.metrics, "step_time_s": round(time.perf_counter() - started, 3)}
            consumed = tuple(unit.id for unit in units) + outcome.also_consumed
            await self.commit(outcome, "training", metrics, consumed, self._durable_position(seen))

    async def commit(
        self,
        outcome: StepOutcome,
        operation: str,
        metrics: dict[str, Any],
        consumed: tuple[str, ...] = (),
        cursor: int | None = None,
    ) -> StepRow:
        """Commit a step as the next number of this scenario. Call with `lock` held."""
        last = await self._store.steps.last(self.scenario)
        return await self._store.steps.commit(
            StepCommit(
                scenario=self.scenario,
                step=(last["step"] if last else 0) + 1,
                operation=operation,
                result=outcome.result,
                consumed=consumed,
                metrics=metrics,
                release_id=outcome.release_id,
                parent_release_id=outcome.parent_release_id,
                request_id=outcome.request_id,
                cursor=cursor,
            )
        )


class RecipeWorkers:
    """One worker per scenario of a learning recipe, woken by the events of the record types it consumes."""

    def __init__(self, recipe: Recipe, store: Store, bus: EventBus) -> None:
        self._recipe = recipe
        self._store = store
        self._bus = bus
        self._workers: dict[str, ScenarioWorker] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._listener: asyncio.Task[None] | None = None
        self._subscription: Subscription | None = None
        self._consumes = consumed_types(recipe)

    def start(self) -> None:
        if not self._recipe.trains:
            return
        self._listener = asyncio.create_task(self._listen())
        for scenario in self._store.scenarios.all():
            if scenario.recipe == self._recipe.name:
                self.worker(scenario.name)

    def adopt(self, scenario: str) -> None:
        """A scenario just moved to this recipe: start its worker and let it read the records already there."""
        if self._recipe.trains:
            self.worker(scenario).wake()

    def worker(self, scenario: str) -> ScenarioWorker:
        worker = self._workers.get(scenario)
        if worker is None:
            worker = self._workers[scenario] = ScenarioWorker(self._recipe, self._store, scenario)
            self._tasks[scenario] = asyncio.create_task(self._supervise(worker), name=f"reef-recipe-{scenario}")
        return worker

    async def _supervise(self, worker: ScenarioWorker) -> None:
        """Keep a scenario's worker running; an unexpected error is logged and shown in status, then retried."""
        while True:
            try:
                await worker.run()
            except asyncio.CancelledError:
                raise
            except LeaseLost:
                log.warning("recipe worker for %s lost its lease; it runs where it is taken next", worker.scenario)
                worker.buffered.clear()
                worker.wake()
            except Exception as exc:
                log.exception("recipe worker for %s failed; retrying in 1 s", worker.scenario)
                worker.last_error = f"{type(exc).__name__}: {exc}"
                worker.buffered.clear()
                await asyncio.sleep(1.0)
                worker.wake()

    async def _listen(self) -> None:
        while True:
            wanted = [RECORD_EVENTS[type_] for type_ in self._consumes]
            self._subscription = subscription = self._bus.subscribe(types=wanted)
            while (event := await subscription.next()) is not None:
                if EVENT_RECORD_TYPES.get(event.type) in self._consumes and event.scenario is not None:
                    scenario = self._store.scenarios.get(event.scenario)
                    if scenario is not None and scenario.recipe == self._recipe.name:
                        self.worker(event.scenario).wake()
            # The bus dropped us (we fell behind): wake everyone, since an event may be lost, and listen again.
            for worker in self._workers.values():
                worker.wake()

    async def change_release(self, scenario: Scenario, operation: str, release_id: str) -> StepRow:
        """Promote or roll back, between steps, and commit it as a step of its own (history is never rewritten)."""
        worker = self.worker(scenario.name)
        if not worker.runs_here:
            raise Conflict(
                f"scenario '{scenario.name}' trains on another daemon of this store; send the {operation} there",
                type="worker_elsewhere",
            )
        async with worker.lock:
            change = self._recipe.promote if operation == "promote" else self._recipe.rollback
            outcome = await change(scenario, release_id)
            return await worker.commit(outcome, operation, {**outcome.metrics, "target_release_id": release_id})

    async def stop(self) -> None:
        tasks = [*self._tasks.values(), *([self._listener] if self._listener else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._subscription is not None:
            self._subscription.close()

    def errors(self) -> list[str]:
        """The last failure of each scenario's worker, for `/reef/status`."""
        return [f"{name}: {worker.last_error}" for name, worker in self._workers.items() if worker.last_error]

    async def status(self) -> dict[str, ScenarioTraining]:
        """Per scenario: steps, the last one, waiting units, ineligible counts by reason, a running step, errors."""
        scenarios: dict[str, ScenarioTraining] = {}
        for name, worker in self._workers.items():
            last = await self._store.steps.last(name)
            scenarios[name] = {
                "steps": last["step"] if last else 0,
                "last_step": last,
                "waiting_units": len(worker.buffered),
                "ineligible": await self._store.steps.ineligible(name),
                "running_since": worker.running_since,
                "error": worker.last_error,
                "runs_here": worker.runs_here,
            }
        return scenarios
