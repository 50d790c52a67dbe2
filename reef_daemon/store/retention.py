"""The retention budget (`store.max-bytes`, `store.max-age`): the oldest record bodies beyond it are dropped.

A trimmed inference record keeps its row: id, scenario, times, status, score, token counts and preview stay; its
request, response, assembled answer and token data go, and `trimmed_at` says when. A body that an unsettled step
still needs is never trimmed: in a scenario whose recipe trains, a record referenced by a report that no step has
consumed nor judged ineligible (and, for a recipe that trains on inference records, a record itself not yet
settled). The same SQL runs on both engines; each pass trims in batches, one short write transaction each.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from reef_daemon.store.engines.engine import Connection
from reef_daemon.store.engines.reader import Reader
from reef_daemon.store.engines.writer import GroupCommitWriter, WriteContext

log = logging.getLogger("reef.store")

BATCH = 500
INTERVAL_S = 30.0
_SIZE = "coalesce(length(request), 0) + coalesce(length(response), 0) + coalesce(length(answer), 0)" \
    " + coalesce(length(tokens), 0)"  # fmt: skip
_UNSETTLED = "(SELECT record_id FROM consumed_records UNION SELECT record_id FROM ineligible_records)"


@dataclass(frozen=True)
class Budget:
    max_bytes: int | None = None
    max_age_s: float | None = None

    @property
    def set(self) -> bool:
        return self.max_bytes is not None or self.max_age_s is not None


@dataclass(frozen=True)
class Usage:
    """Bytes of inference bodies kept, and how many records were trimmed."""

    body_bytes: int
    trimmed: int


@dataclass(frozen=True)
class Protected:
    """What a recipe may still train on: the scenarios a recipe trains (the records their unsettled reports
    reference are kept), and of those, the ones whose units are inference records themselves (kept until settled)."""

    scenarios: Collection[str] = ()
    inference_scenarios: Collection[str] = ()


class RetentionStore:
    def __init__(self, writer: GroupCommitWriter, reader: Reader, budget: Budget) -> None:
        self._writer = writer
        self._reader = reader
        self.budget = budget
        self.last_usage: Usage | None = None  # as of the last pass (status shows it)

    async def usage(self) -> Usage:
        self.last_usage = await self._reader.run(_usage)
        return self.last_usage

    async def trim(self, protected: Protected) -> int:
        """Trim what is beyond the budget; returns how many records were trimmed."""
        if not self.budget.set:
            return 0
        trimmed = 0
        while True:
            used = (await self.usage()).body_bytes
            over = used - self.budget.max_bytes if self.budget.max_bytes is not None else 0
            cutoff = time.time() - self.budget.max_age_s if self.budget.max_age_s is not None else None
            done, more = await self._writer.submit(
                functools.partial(_trim_batch, over=over, cutoff=cutoff, protected=protected)
            )
            trimmed += done
            if not more:
                break
        if trimmed:
            await self.usage()
            log.info("store: trimmed the bodies of %d records to keep within the retention budget", trimmed)
        return trimmed

    async def run(self, protected: Callable[[], Protected]) -> None:
        """Trim now and every INTERVAL_S, for as long as the daemon runs."""
        while True:
            with contextlib.suppress(Exception):  # a failed pass (the database away) is tried again later
                await self.trim(protected())
            await asyncio.sleep(INTERVAL_S)


def _usage(conn: Connection) -> Usage:
    row = conn.execute(
        f"SELECT coalesce(sum({_SIZE}), 0) AS used,"  # noqa: S608
        " count(CASE WHEN trimmed_at IS NOT NULL THEN 1 END) AS trimmed FROM records WHERE type = 'inference'"
    ).fetchone()
    return Usage(int(row["used"]), int(row["trimmed"]))


def _trim_batch(ctx: WriteContext, *, over: int, cutoff: float | None, protected: Protected) -> tuple[int, bool]:
    """Trim up to BATCH of the oldest records: enough to free `over` bytes, and every one made before `cutoff`.
    Returns how many it trimmed, and whether more may be due."""
    if over <= 0 and cutoff is None:
        return 0, False
    clauses = ["type = 'inference'", "trimmed_at IS NULL", f"({_SIZE}) > 0"]
    params: list[object] = []
    scenarios = sorted(protected.scenarios)
    if scenarios:
        marks = ",".join("?" * len(scenarios))
        clauses.append(
            "id NOT IN (SELECT refs.record_id FROM report_references AS refs"  # noqa: S608
            " JOIN records AS reports ON reports.sequence = refs.report_sequence"
            f" WHERE reports.scenario IN ({marks}) AND reports.id NOT IN {_UNSETTLED})"
        )
        params += scenarios
    on_inference = sorted(protected.inference_scenarios)
    if on_inference:
        marks = ",".join("?" * len(on_inference))
        clauses.append(f"NOT (scenario IN ({marks}) AND id NOT IN {_UNSETTLED})")
        params += on_inference
    rows = ctx.conn.execute(
        f"SELECT sequence, created_at, {_SIZE} AS size FROM records WHERE {' AND '.join(clauses)}"  # noqa: S608
        " ORDER BY sequence LIMIT ?",
        (*params, BATCH),
    ).fetchall()
    chosen: list[int] = []
    freed = 0
    for row in rows:
        if freed >= over and (cutoff is None or row["created_at"] >= cutoff):
            break
        chosen.append(row["sequence"])
        freed += row["size"]
    if chosen:
        marks = ",".join("?" * len(chosen))
        ctx.conn.execute(
            "UPDATE records SET request = NULL, response = NULL, answer = NULL, tokens = NULL, trimmed_at = ?"  # noqa: S608
            f" WHERE sequence IN ({marks})",
            (time.time(), *chosen),
        )
    return len(chosen), len(chosen) == len(rows) == BATCH
