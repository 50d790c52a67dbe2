"""Scenarios: named workloads, each bound to the deployment's recipe when first seen. Kept in memory too,
because every inference request needs its scenario and the hot path must not read the database.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Literal, TypeVar, cast

from reef_contract import ScenarioChange, ScenarioEvent, ScenarioInfo
from reef_daemon.errors import Conflict, NotFound
from reef_daemon.names import archived_name
from reef_daemon.store.engines.engine import Columns, Connection
from reef_daemon.store.engines.writer import Event, GroupCommitWriter, Operation, WriteContext

T = TypeVar("T")

TRAINING_MODES = ("auto", "manual", "hybrid")
# Tables whose rows belong to a scenario and follow it when it is archived (records too, above them).
_SCENARIO_TABLES = (
    "events", "steps", "consumed_records", "ineligible_records", "recipe_cursors", "eval_tasks", "replay_decisions",
    "canaries", "release_homes",
)  # fmt: skip


@dataclass(frozen=True)
class Scenario:
    name: str
    recipe: str
    training_mode: str
    created_at: float

    def to_json(self) -> ScenarioInfo:
        return {
            "recipe": self.recipe,
            "training_mode": self.training_mode,
            "created_at": self.created_at,
            "scenario": self.name,
        }


class ScenarioStore:
    def __init__(self, writer: GroupCommitWriter) -> None:
        self._writer = writer
        self._active: dict[str, Scenario] = {}

    def load(self, conn: Connection) -> None:
        """Fill the in-memory view from the database at start-up."""
        rows = conn.execute("SELECT name, recipe, training_mode, created_at FROM scenarios WHERE archived_at IS NULL")
        self._active = {row["name"]: _scenario(row) for row in rows}

    def follow(self, events: list[Event]) -> None:
        """Take in the scenario changes another daemon on the same store committed (a shared store's follower)."""
        for event in events:
            if event.type != "scenario":
                continue
            data = cast(ScenarioEvent, event.data)
            change = data["object"]
            name = change["scenario"]
            if data["action"] == "archived":
                self._active.pop(name, None)
            else:
                self._active[name] = Scenario(name, change["recipe"], change["training_mode"], change["created_at"])

    def get(self, name: str) -> Scenario | None:
        return self._active.get(name)

    def require(self, name: str) -> Scenario:
        scenario = self._active.get(name)
        if scenario is None:
            raise NotFound(f"no scenario named '{name}'", type="unknown_scenario")
        return scenario

    def all(self) -> list[Scenario]:
        return sorted(self._active.values(), key=lambda s: s.name)

    async def ensure(self, name: str, recipe: str, training_mode: str) -> tuple[Scenario, bool]:
        """The scenario named `name`, created with this recipe if new. Returns (scenario, created)."""
        existing = self._active.get(name)
        if existing is not None:
            return existing, False
        scenario, created = await self._writer.submit(
            lambda ctx: self._insert(ctx, Scenario(name, recipe, training_mode, time.time()))
        )
        self._active.setdefault(name, scenario)
        return self._active[name], created

    async def ensure_with(self, name: str, recipe: str, training_mode: str, operation: Operation[T]) -> T:
        """Run `operation` in the transaction that creates the scenario if it is new: an operation that refuses
        (a bad reference, a conflict) leaves no scenario behind."""
        if name in self._active:
            return await self._writer.submit(operation)

        def write(ctx: WriteContext) -> tuple[Scenario, T]:
            scenario, _created = self._insert(ctx, Scenario(name, recipe, training_mode, time.time()))
            return scenario, operation(ctx)

        scenario, result = await self._writer.submit(write)
        self._active.setdefault(name, scenario)
        return result

    @staticmethod
    def _insert(ctx: WriteContext, scenario: Scenario) -> tuple[Scenario, bool]:
        cursor = ctx.conn.execute(
            "INSERT INTO scenarios (name, recipe, training_mode, created_at) VALUES (?,?,?,?) ON CONFLICT DO NOTHING",
            (scenario.name, scenario.recipe, scenario.training_mode, scenario.created_at),
        )
        if cursor.rowcount == 0:
            row = ctx.conn.execute(
                "SELECT name, recipe, training_mode, created_at, archived_at, archived_as"
                " FROM scenarios WHERE name = ?",
                (scenario.name,),
            ).fetchone()
            if row["archived_at"] is not None:
                # The name an archive gave: its records are kept as they were archived, so nothing is added.
                raise Conflict(
                    f"'{scenario.name}' is the archive of scenario '{row['archived_as']}' and takes no new records;"
                    f" send to '{row['archived_as']}' or another name",
                    type="archived_scenario",
                )
            return _scenario(row), False
        _announce(ctx, "created", scenario.to_json())
        return scenario, True

    async def set_training_mode(self, name: str, mode: str) -> Scenario:
        current = self.require(name)
        updated = replace(current, training_mode=mode)

        def write(ctx: WriteContext) -> None:
            ctx.conn.execute("UPDATE scenarios SET training_mode = ? WHERE name = ?", (mode, name))
            _announce(ctx, "updated", updated.to_json())

        await self._writer.submit(write)
        self._active[name] = updated
        return updated

    async def move_to_recipe(self, name: str, recipe: str, training_mode: str) -> Scenario:
        """Bind a scenario made under another recipe to `recipe`; its records stay and the new recipe reads them."""
        current = self.require(name)
        updated = replace(current, recipe=recipe, training_mode=training_mode)

        def write(ctx: WriteContext) -> None:
            ctx.conn.execute(
                "UPDATE scenarios SET recipe = ?, training_mode = ? WHERE name = ?", (recipe, training_mode, name)
            )
            _announce(ctx, "updated", updated.to_json(), previous_recipe=current.recipe)

        await self._writer.submit(write)
        self._active[name] = updated
        return updated

    async def archive(self, name: str) -> str:
        """Archive a scenario: its records stay, under a new name, and the name is free again."""
        current = self.require(name)
        archived_as = archived_name(name, time.time())

        def write(ctx: WriteContext) -> None:
            now = time.time()
            ctx.conn.execute(
                "UPDATE scenarios SET name = ?, archived_at = ?, archived_as = ? WHERE name = ?",
                (archived_as, now, name, name),
            )
            ctx.conn.execute("UPDATE records SET scenario = ? WHERE scenario = ?", (archived_as, name))
            for table in _SCENARIO_TABLES:
                ctx.conn.execute(f"UPDATE {table} SET scenario = ? WHERE scenario = ?", (archived_as, name))  # noqa: S608
            _announce(ctx, "archived", current.to_json(), archived_as=archived_as)

        await self._writer.submit(write)
        self._active.pop(name, None)
        return archived_as


def _scenario(row: Columns) -> Scenario:
    return Scenario(row["name"], row["recipe"], row["training_mode"], row["created_at"])


def _announce(
    ctx: WriteContext,
    action: Literal["created", "updated", "archived"],
    info: ScenarioInfo,
    *,
    archived_as: str | None = None,
    previous_recipe: str | None = None,
) -> None:
    change: ScenarioChange = {
        "recipe": info["recipe"],
        "training_mode": info["training_mode"],
        "created_at": info["created_at"],
        "scenario": info["scenario"],
    }
    if archived_as is not None:
        change["archived_as"] = archived_as
    if previous_recipe is not None:
        change["previous_recipe"] = previous_recipe
    event: ScenarioEvent = {"action": action, "object": change}
    ctx.record_event("scenario", info["scenario"], event)
