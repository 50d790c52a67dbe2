"""The record store: one database (SQLite in WAL mode, or PostgreSQL for a team), one group-commit writer per
daemon, read-only readers."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from pathlib import Path

from reef_contract import ScoreScale
from reef_daemon.harness.tables.canaries import CanaryStore
from reef_daemon.harness.tables.live_scores import LiveScoreReader, PeriodSums, ReleaseTally
from reef_daemon.harness.tables.tasks import TaskDraft, TaskLimits, TaskPage, TaskStore, gate_tasks
from reef_daemon.store.engines.checkpointer import Checkpointer
from reef_daemon.store.engines.engine import ANSWER_WAIT_S, DATABASE_NAME, DB_ERRORS, Engine, StoreUnavailable
from reef_daemon.store.engines.file_owner import FileOwner
from reef_daemon.store.engines.follower import EventFollower, last_sequence
from reef_daemon.store.engines.leases import AdvisoryLeases, Leases
from reef_daemon.store.engines.opening import open_engine
from reef_daemon.store.engines.reader import Reader
from reef_daemon.store.engines.writer import Event, GroupCommitWriter
from reef_daemon.store.events import EventLog
from reef_daemon.store.exports import ExportReader
from reef_daemon.store.imports import DraftFor, ImportDraft, ImportStore
from reef_daemon.store.records import RecordQuery, RecordStore
from reef_daemon.store.retention import Budget, Protected, RetentionStore
from reef_daemon.store.scenarios import TRAINING_MODES, Scenario, ScenarioStore
from reef_daemon.store.source_trust import SourceTrust, TrustPolicy
from reef_daemon.store.spend import SpendReader, TokenSums
from reef_daemon.store.steps import StepCommit, StepStore

__all__ = [
    "DATABASE_NAME",
    "TRAINING_MODES",
    "Budget",
    "CanaryStore",
    "DraftFor",
    "Engine",
    "Event",
    "EventLog",
    "ExportReader",
    "ImportDraft",
    "ImportStore",
    "LiveScoreReader",
    "PeriodSums",
    "Protected",
    "RecordQuery",
    "RecordStore",
    "ReleaseTally",
    "Scenario",
    "ScenarioStore",
    "SourceTrust",
    "StepCommit",
    "StepStore",
    "Store",
    "StoreUnavailable",
    "TaskDraft",
    "TaskLimits",
    "TaskPage",
    "TaskStore",
    "TokenSums",
    "TrustPolicy",
    "gate_tasks",
]


class Store:
    """Opens the database (the SQLite file under the state directory, or the PostgreSQL database at `url`) and
    wires its parts together."""

    def __init__(
        self,
        state_dir: Path,
        on_events: Callable[[list[Event]], None],
        *,
        score_scale: ScoreScale,
        url: str | None = None,
        budget: Budget | None = None,
        trust: TrustPolicy | None = None,
        flush: bool = False,
        answer_wait_s: float = ANSWER_WAIT_S,
    ) -> None:
        self.engine = open_engine(url, state_dir, flush=flush, answer_wait_s=answer_wait_s)
        # Where this daemon keeps releases, as daemons sharing the store tell each other (see recipe_worker.py).
        self.home = f"{socket.gethostname()}:{state_dir.resolve()}"
        self._on_events = on_events
        # One daemon on a file announces what its writer committed. Daemons sharing a database each follow it
        # too, so every daemon announces every daemon's commits, in one order, once.
        self._follower = EventFollower(self.engine, self._followed) if self.engine.shared else None
        on_commit = self._follower.committed if self._follower is not None else None
        self.writer = GroupCommitWriter(self.engine, on_events, on_commit=on_commit)
        # Which scenarios' recipe workers run on this daemon (all of them, unless daemons share the store).
        self.leases: Leases = AdvisoryLeases(self.engine) if self.engine.shared else Leases()
        # SQLite's WAL is moved into the file off the writer's thread; PostgreSQL checkpoints by itself.
        self._checkpointer = None if self.engine.shared else Checkpointer(self.engine, self.writer)
        self._owner = None if self.engine.shared else FileOwner(self.engine.path)  # one daemon per SQLite file
        self._reader: Reader | None = None
        self.score_scale = score_scale  # the reports' scale, which says what a low score is
        self._budget = budget or Budget()
        self._trust_policy = trust or TrustPolicy()  # when a derived source stops counting in a scenario
        self.scenarios = ScenarioStore(self.writer)

    @property
    def reader(self) -> Reader:
        if self._reader is None:
            raise RuntimeError("the store is not open")
        return self._reader

    def open(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._owner is not None:
            self._owner.claim()
        try:
            self.writer.start(loop)  # creates the file and applies migrations first
        except DB_ERRORS as exc:
            if self._owner is not None:
                self._owner.release()
            raise StoreUnavailable(f"cannot open the store: {exc}") from None
        if self._checkpointer is not None:
            self._checkpointer.start()
        self._reader = Reader(self.engine, size=4 if self.engine.shared else 2)
        self.trust = SourceTrust(self.writer, self._reader, self._trust_policy, self.score_scale)
        self.records = RecordStore(self.writer, self._reader, self.trust)
        self.imports = ImportStore(self.writer, self.records)
        self.exports = ExportReader(self._reader)
        self.events = EventLog(self._reader)
        self.steps = StepStore(self.writer, self._reader)
        self.tasks = TaskStore(self.writer, self._reader, self.score_scale)
        self.live_scores = LiveScoreReader(self._reader)
        self.spend = SpendReader(self._reader)
        self.canaries = CanaryStore(self.writer, self._reader)
        self.retention = RetentionStore(self.writer, self._reader, self._budget)
        self._reader.run_blocking(self.scenarios.load)
        if self._follower is not None:
            self._follower.start(loop, self._reader.run_blocking(last_sequence))

    def _followed(self, events: list[Event]) -> None:
        self.scenarios.follow(events)
        self._on_events(events)

    def close(self) -> None:
        """Finish queued writes, close every connection, and leave the records in the database file itself."""
        self.writer.stop()
        if self._follower is not None:
            self._follower.stop()  # after the writer: its last commits are announced
        self.leases.close()
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._checkpointer is not None:
            self._checkpointer.stop()
        if self._owner is not None:
            self._owner.release()

    def listening_at(self, url: str) -> None:
        """Say where this daemon answers, for a second daemon on the same SQLite file to name it."""
        if self._owner is not None:
            self._owner.note(url)
