"""What a recipe reads of the store: the store view, as Protocols the daemon's `Store` satisfies structurally.

A recipe (and the daemon's parts a recipe builds, such as `HarnessHost`) is handed the store through this view, so it
can list scenarios, read records, steps and evaluation tasks, and never writes around the recipe worker's commits.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from reef_contract import REPORT_SOURCES, CanaryState, EvalTask, RecordPage, ScoreScale, StepRow, StoredRecord
from reef_daemon.store.records import RecordQuery
from reef_daemon.store.scenarios import Scenario

Tasks = list[EvalTask]  # (TaskView.list shadows `list` in the class body)


class ScenarioView(Protocol):
    """The deployment's scenarios."""

    def all(self) -> list[Scenario]:
        """Every scenario, whichever recipe it is bound to."""
        ...


class RecordView(Protocol):
    """The stored records."""

    async def list(self, query: RecordQuery) -> RecordPage:
        """One page of records matching `query`, as `GET /reef/records` lists them."""
        ...

    async def get(self, record_id: str) -> StoredRecord:
        """One record in full; raises `NotFound` for an unknown id."""
        ...


class StepView(Protocol):
    """The committed steps."""

    async def history(self, scenario: str) -> list[StepRow]:
        """The scenario's steps, newest first."""
        ...

    async def last(self, scenario: str) -> StepRow | None:
        """The scenario's newest step, or None before its first."""
        ...


class TaskView(Protocol):
    """The evaluation tasks a person keeps, and the replays of low-scored conversations."""

    async def list(self, scenario: str) -> Tasks:
        """The scenario's tasks."""
        ...

    async def replays(self, scenario: str, limit: int, sources: Collection[str] = REPORT_SOURCES) -> Tasks:
        """Up to `limit` replays of the scenario's conversations low-scored by `sources`."""
        ...


class CanaryView(Protocol):
    """The running canaries."""

    async def get(self, scenario: str) -> CanaryState | None:
        """The scenario's running canary, or None."""
        ...


class StoreView(Protocol):
    """The store as a recipe sees it: read-only, the daemon's `Store` satisfies it."""

    @property
    def score_scale(self) -> ScoreScale:
        """The reports' score scale, which says what a low score is."""
        ...

    @property
    def scenarios(self) -> ScenarioView:
        """The scenarios."""
        ...

    @property
    def records(self) -> RecordView:
        """The records."""
        ...

    @property
    def steps(self) -> StepView:
        """The committed steps."""
        ...

    @property
    def tasks(self) -> TaskView:
        """The evaluation tasks."""
        ...

    @property
    def canaries(self) -> CanaryView:
        """The running canaries."""
        ...
