"""The harness state of a deployment: its release repository read together with the committed steps.

Versions come from the steps table (vN: the Nth step that made a release, selected or pending; a skipped or
rejected step has none; the scenario's first release is v0), releases from git. The
served head is the newest committed step that selected a release, else v0. A pending release (one touching an
extension) is stored but not served until a promote step republishes it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters import Adapter
from reef_contract import ReleaseRequest, ReleaseRow, StepRow
from reef_daemon.errors import BadRequest, Conflict, NotFound
from reef_daemon.harness.releases import Release, ReleaseRepository
from reef_daemon.store.view import StoreView
from reef_harness import Entry, entries_from_json

REPOSITORY = "releases.git"


@dataclass(frozen=True)
class Served:
    release_id: str
    version: str


class HarnessHost:
    def __init__(self, state_dir: Path, adapter: Adapter) -> None:
        self.adapter = adapter
        self.repository = ReleaseRepository(state_dir / REPOSITORY)
        self._store: StoreView | None = None
        self._base_lock = asyncio.Lock()
        self._heads: dict[str, str] = {}

    def open(self, store: StoreView) -> None:
        self._store = store

    def close(self) -> None:
        self.repository.close()

    @property
    def store(self) -> StoreView:
        if self._store is None:
            raise RuntimeError("the harness host is not open")
        return self._store

    def cached_head(self, scenario: str) -> str | None:
        """The served release as last seen (for synchronous callers); `served()` is the truth."""
        return self._heads.get(scenario)

    def remember_head(self, scenario: str, release_id: str) -> None:
        self._heads[scenario] = release_id

    async def base(self, scenario: str) -> str:
        """The scenario's v0: an empty tree, made on first need."""
        async with self._base_lock:
            manifest = {
                "format": 1,
                "scenario": scenario,
                "adapter": self.adapter.name,
                "operation": "creation",
                "parent_release_id": None,
                "entries": [],
                "summary": "the empty harness",
            }
            files = self.adapter.render([])
            return await asyncio.to_thread(self.repository.create_base, scenario, files, manifest)

    async def served(self, scenario: str) -> Served:
        for step in await self.store.steps.history(scenario):
            if step["result"] == "selected" and step["release_id"]:
                self._heads[scenario] = step["release_id"]
                return Served(step["release_id"], _label(step))
        base = await self.base(scenario)
        self._heads[scenario] = base
        return Served(base, "v0")

    async def read(self, scenario: str, release_id: str) -> Release:
        release = await asyncio.to_thread(self.repository.read, scenario, release_id)
        if release is None:
            raise NotFound(f"no release '{release_id[:64]}' in scenario '{scenario}'", type="unknown_release")
        return release

    async def tree(self, scenario: str, release_id: str) -> list[Entry]:
        return entries_from_json((await self.read(scenario, release_id)).manifest["entries"])

    async def versions(self, scenario: str) -> dict[str, str]:
        """release id -> vN, for every release a step committed, and v0."""
        steps = await self.store.steps.history(scenario)
        found = {step["release_id"]: step["version"] for step in steps if step["release_id"] and step["version"]}
        found[await self.base(scenario)] = "v0"
        return found

    async def publish(self, scenario: str, candidate: list[Entry], parent: str, manifest: dict[str, Any]) -> str:
        """Render and commit a candidate tree built on `parent`; returns the release id."""
        files = self.adapter.render(candidate)
        full = {
            "format": 1,
            "scenario": scenario,
            "adapter": self.adapter.name,
            "parent_release_id": parent,
            "entries": [entry.to_json() for entry in candidate],
            **manifest,
        }
        return await asyncio.to_thread(self.repository.commit, scenario, files, full, parent)

    async def republish(self, scenario: str, operation: str, target: str) -> tuple[str, str, str]:
        """Promote a pending release or the running canary's, or roll back to an earlier served one, as a new commit
        on the served head.

        Returns (new release id, parent release id, the target's version). History is never rewritten.
        """
        steps = await self.store.steps.history(scenario)
        served = await self.served(scenario)
        base = await self.base(scenario)
        row = next((step for step in steps if step["release_id"] == target), None)
        if row is None and target != base:
            raise NotFound(f"no release '{target[:64]}' in scenario '{scenario}'", type="unknown_release")
        version = _label(row) if row else "v0"
        canary = await self.store.canaries.get(scenario)
        # A running canary's version is promoted whatever its step's result: that serves it to all (the step store
        # ends the canary in the same transaction).
        on_canary = canary is not None and canary["release_id"] == target
        if operation == "promote" and not on_canary:
            if row is None or row["result"] != "pending":
                raise BadRequest(f"{version} is not pending review, so there is nothing to promote", type="not_pending")
            if any(
                step["metrics"].get("target_release_id") == target and step["operation"] == "promote" for step in steps
            ):
                raise Conflict(f"{version} was already promoted", type="already_promoted")
        elif operation != "promote":
            if row is not None and row["result"] != "selected":
                raise BadRequest(
                    f"{version} was never served ({row['result']}); only served versions can be restored",
                    type="not_restorable",
                )
            if target == served.release_id:
                raise Conflict(f"{version} is already the served version", type="already_current")
        release = await self.read(scenario, target)
        manifest = {
            **release.manifest,
            "operation": operation,
            "source_release_id": target,
            "source_version": version,
            "summary": f"{operation} of {version}",
        }
        manifest["parent_release_id"] = served.release_id
        release_id = await asyncio.to_thread(self.repository.republish, scenario, target, manifest, served.release_id)
        self._heads[scenario] = release_id
        return release_id, served.release_id, version

    async def catalog(self, scenario: str, steps: list[ReleaseRow]) -> list[ReleaseRow]:
        """Release rows, newest first: each step with its request text, pending and current flags; then v0."""
        served = await self.served(scenario)
        promoted = {
            step["metrics"].get("target_release_id"): step["version"]
            for step in steps
            if step["operation"] == "promote"
        }
        rows: list[ReleaseRow] = []
        for step in steps:
            current = step["release_id"] is not None and step["release_id"] == served.release_id
            row: ReleaseRow = {
                **step,
                "current": current,
                "pending": step["result"] == "pending" and step["release_id"] not in promoted,
                "promoted_as": promoted.get(step["release_id"]) if step["result"] == "pending" else None,
                "restorable": step["result"] == "selected" and bool(step["release_id"]) and not current,
                "request": await self._request(step.get("request_id")),
            }
            rows.append(row)
        base = await self.base(scenario)
        rows.append(
            {
                "scenario": scenario,
                "step": 0,
                "version": "v0",
                "operation": "creation",
                "result": "selected",
                "release_id": base,
                "parent_release_id": None,
                "request_id": None,
                "consumed": [],
                "metrics": {},
                "created_at": None,
                "current": base == served.release_id,
                "pending": False,
                "promoted_as": None,
                "restorable": base != served.release_id,
                "request": None,
            }
        )
        return rows

    async def _request(self, request_id: str | None) -> ReleaseRequest | None:
        if not request_id:
            return None
        try:
            record = await self.store.records.get(request_id)
        except NotFound:
            return None
        return {"id": request_id, "text": record.get("text"), "session": record.get("session")}


def _label(step: StepRow) -> str:
    """A step's version, or `step N` for one that made none (skipped, rejected)."""
    return step["version"] or f"step {step['step']}"
