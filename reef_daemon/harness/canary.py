"""Live evidence for a harness: per-version scores of the real sessions each release served, and canaries.

A canary serves a release to a share of new sessions beside the served release (the install holds both trees; the
wrapper picks one per session). It ends when a person promotes or rolls back, or on its own when its scores fall
clearly below the served release's: at least `harness.canary-min-scored` scored records each and 95% intervals
that do not overlap. Every start and end is a `canary` event saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from reef_daemon.context import Daemon
from reef_daemon.contract import CanaryState, VersionScore, VersionScores, low_score_below
from reef_daemon.errors import BadRequest, Conflict
from reef_daemon.harness.access import harness_recipe
from reef_daemon.harness.score_stats import (
    CONFIDENCE,
    METHOD,
    ScoreSummary,
    clearly_worse,
    describe,
    summarize,
)
from reef_daemon.store import ReleaseTally

log = logging.getLogger("reef.canary")

TREND_WINDOWS = 12
ROLLED_BACK = "rolled_back"


def _summary(tally: ReleaseTally | None) -> ScoreSummary:
    if tally is None:
        return summarize(0, 0.0, 0.0, 0)
    return summarize(tally.scored, tally.total, tally.squares, tally.low)


def version_score(tally: ReleaseTally, score_min: float, score_max: float) -> VersionScore:
    """A release's live scores; its interval clipped to the score scale (a mean cannot leave it)."""
    summary = _summary(tally)
    interval = summary.interval
    if interval is not None:
        interval = (max(score_min, interval[0]), min(score_max, interval[1]))
    return {
        "release_id": tally.release_id,
        "sessions": tally.sessions,
        "records": tally.records,
        "scored": tally.scored,
        "mean": summary.mean,
        "interval": {"low": interval[0], "high": interval[1]} if interval else None,
        "low_share": summary.low_share,
        "first_at": tally.first_at,
        "last_at": tally.last_at,
        "trend": tally.trend,
    }


async def version_scores(daemon: Daemon, scenario: str) -> VersionScores:
    """Every tagged release's live scores in the scenario, oldest first, and the running canary."""
    scale = daemon.settings.reports
    low_below = low_score_below(daemon.store.score_scale)
    tallies = await daemon.store.live_scores.tallies(scenario, low_below, TREND_WINDOWS)
    return {
        "scenario": scenario,
        "score_min": scale.score_min,
        "score_max": scale.score_max,
        "low_below": low_below,
        "confidence": CONFIDENCE,
        "method": METHOD,
        "versions": [version_score(tally, scale.score_min, scale.score_max) for tally in tallies],
        "canary": await daemon.store.canaries.get(scenario),
    }


async def start_canary(daemon: Daemon, scenario: str, release_id: str, share: float) -> CanaryState:
    """Serve `release_id` to `share` percent of new sessions; BadRequest for a share outside (0, 100) or a release
    that is the served one, NotFound for one the scenario does not have."""
    if not 0 < share < 100:
        raise BadRequest(f"share must be a percentage between 0 and 100 (exclusive), not {share:g}", type="bad_share")
    harness = harness_recipe(daemon).harness
    release = await harness.read(scenario, release_id)
    served = await harness.served(scenario)
    version = (await harness.versions(scenario)).get(release.release_id, "unpublished")
    if release.release_id == served.release_id:
        raise Conflict(f"{version} is already the served version; a canary tries another", type="already_current")
    return await daemon.store.canaries.start(scenario, release.release_id, version, share, served.release_id)


async def check_canary(daemon: Daemon, scenario: str) -> CanaryState | None:
    """Roll the scenario's canary back when it scores clearly worse than the release it runs beside; the canary
    rolled back, else None."""
    canary = await daemon.store.canaries.get(scenario)
    if canary is None:
        return None
    low_below = low_score_below(daemon.store.score_scale)
    tallies = {tally.release_id: tally for tally in await daemon.store.live_scores.tallies(scenario, low_below, 0)}
    ours, theirs = _summary(tallies.get(canary["release_id"])), _summary(tallies.get(canary["served_release_id"]))
    least = int(daemon.settings.value("harness.canary-min-scored"))
    if not clearly_worse(ours, theirs, least):
        return None
    served = describe("the served version", theirs)
    reason = (
        f"rolled back automatically: {describe(canary['version'], ours)}, clearly below {served} "
        f"(the 95% intervals do not overlap; each has at least {least} scored records)"
    )
    ended = await daemon.store.canaries.end(scenario, ROLLED_BACK, reason, canary["release_id"])
    if ended is not None:
        log.warning("canary %s of %s %s", canary["version"], scenario, reason)
    return ended


class CanaryWatch:
    """Checks a scenario's canary each time a report scores its records."""

    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _watch(self) -> None:
        # A subscriber that falls far behind is dropped by the bus; subscribe again until the daemon stops.
        while not self._daemon.stopping:
            subscription = self._daemon.bus.subscribe()
            try:
                while (event := await subscription.next()) is not None:
                    if event.type == "report" and event.scenario:
                        await self._check(event.scenario)
            finally:
                subscription.close()

    async def _check(self, scenario: str) -> None:
        try:
            await check_canary(self._daemon, scenario)
        except Exception:  # a failed check must not end the watch; the next report checks again
            log.exception("could not check the canary of %s", scenario)
