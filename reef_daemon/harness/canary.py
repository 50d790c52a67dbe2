"""Live evidence for a harness: per-version scores of the real sessions each release served, and canaries.

A canary serves a release to a share of new sessions beside the served release (the install holds both trees; the
wrapper picks one per session). It ends when a person ends or replaces it, when a step serves another release
(promote, rollback or the recipe's own), or on its own when its scores fall clearly below the served release's
over the canary's own period: at least `harness.canary-min-scored` scored records each since it started, and a
sequential test (`score_stats`) that noise passes in at most `harness.canary-false-rollback` of canaries however
often it is checked. Every start and end is a `canary` event saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from reef_contract import (
    CANARY_HIGHEST_SHARE,
    CANARY_LOWEST_SHARE,
    RECORD_EVENTS,
    CanaryState,
    Spend,
    VersionScore,
    VersionScores,
    low_score_below,
)
from reef_daemon.context import Daemon
from reef_daemon.errors import BadRequest, Conflict
from reef_daemon.harness.access import harness_recipe
from reef_daemon.harness.score_stats import (
    CONFIDENCE,
    METHOD,
    ScoreSummary,
    ScoreSums,
    clearly_worse,
    describe,
    summarize,
)
from reef_daemon.recipe_interface import HarnessRecipe
from reef_daemon.store import Event, PeriodSums, ReleaseTally

log = logging.getLogger("reef.canary")

TREND_WINDOWS = 12
ROLLED_BACK = "rolled_back"
NOTHING_SPENT: Spend = {"usd": 0.0, "priced": 0, "unpriced": 0}


def _summary(tally: ReleaseTally | None) -> ScoreSummary:
    if tally is None:
        return summarize(0, 0.0, 0.0, 0)
    return summarize(tally.scored, tally.total, tally.squares, tally.low)


def version_score(tally: ReleaseTally, score_min: float, score_max: float, spend: Spend) -> VersionScore:
    """A release's live scores, and what its records cost; its interval clipped to the score scale (a mean cannot
    leave it)."""
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
        "spend": spend,
    }


async def version_scores(daemon: Daemon, scenario: str) -> VersionScores:
    """The live scores of each of the scenario's releases that tagged records name, oldest first, and the running
    canary."""
    scale = daemon.settings.reports
    low_below = low_score_below(daemon.store.score_scale)
    # Only a harness recipe makes releases; under another recipe no tag names one.
    recipe = daemon.recipe
    releases = await recipe.harness.versions(scenario) if isinstance(recipe, HarnessRecipe) else {}
    sources = daemon.settings.reports.sources
    tallies = await daemon.store.live_scores.tallies(scenario, releases, low_below, TREND_WINDOWS, sources)
    spent = daemon.prices.spend(await daemon.store.spend.by_release(scenario, [t.release_id for t in tallies]))
    return {
        "scenario": scenario,
        "score_min": scale.score_min,
        "score_max": scale.score_max,
        "low_below": low_below,
        "confidence": CONFIDENCE,
        "method": METHOD,
        "versions": [
            version_score(tally, scale.score_min, scale.score_max, spent.get(tally.release_id, NOTHING_SPENT))
            for tally in tallies
        ],
        "canary": await daemon.store.canaries.get(scenario),
    }


def checked_share(share: object) -> float:
    """The share of new sessions a canary serves, in percent; BadRequest for anything but a number from
    CANARY_LOWEST_SHARE to CANARY_HIGHEST_SHARE (a share too small to reach a session is no canary)."""
    number = share if isinstance(share, int | float) and not isinstance(share, bool) else None
    if number is None or not CANARY_LOWEST_SHARE <= number <= CANARY_HIGHEST_SHARE:  # NaN compares false
        sent = "" if number is None else f"; not {number:g}" if not abs(number) >= 1e9 else "; not one that large"
        raise BadRequest(
            f"share must be a percentage from {CANARY_LOWEST_SHARE} to {CANARY_HIGHEST_SHARE} of new sessions,"
            f" such as 20{sent}",
            type="bad_share",
        )
    return float(number)


async def start_canary(daemon: Daemon, scenario: str, release_id: str, share: float) -> CanaryState:
    """Serve `release_id` to `share` percent of new sessions (one running canary ends, replaced); BadRequest for a
    share outside 1..99 percent, Conflict for the served release, NotFound for one the scenario does not have."""
    share = checked_share(share)
    harness = harness_recipe(daemon).harness
    release = await harness.read(scenario, release_id)
    served = await harness.served(scenario)
    version = (await harness.versions(scenario)).get(release.release_id, "unpublished")
    if release.release_id == served.release_id:
        raise Conflict(f"{version} is already the served version; a canary tries another", type="already_current")
    return await daemon.store.canaries.start(scenario, release.release_id, version, share, served.release_id)


def _sums(period: PeriodSums) -> ScoreSums:
    return ScoreSums(period.scored, period.total, period.squares)


def _period_summary(sums: ScoreSums) -> ScoreSummary:
    return summarize(sums.scored, sums.total, sums.squares, 0)


async def check_canary(daemon: Daemon, scenario: str) -> CanaryState | None:
    """Roll the scenario's canary back when it scores clearly worse than the release it runs beside, both counted
    since the canary started; the canary rolled back, else None."""
    canary = await daemon.store.canaries.get(scenario)
    if canary is None:
        return None
    releases = (canary["release_id"], canary["served_release_id"])
    since, sources = canary["started_at"], daemon.settings.reports.sources
    ours, theirs = map(_sums, await daemon.store.live_scores.sums(scenario, releases, since, sources))
    least = daemon.settings.harness.canary_min_scored
    alpha = daemon.settings.harness.canary_false_rollback
    if not clearly_worse(ours, theirs, least, alpha):
        return None
    served = describe("the served version", _period_summary(theirs))
    reason = (
        f"rolled back automatically: {describe(canary['version'], _period_summary(ours))}, clearly below {served}"
        f" since the canary started (a sequential test that rolls back at most {alpha:.2g} of canaries scoring"
        f" like the served version; each has at least {least} scored records)"
    )
    ended = await daemon.store.canaries.end(scenario, ROLLED_BACK, reason, canary["release_id"])
    if ended is not None:
        log.warning("canary %s of %s %s", canary["version"], scenario, reason)
    return ended


def _reported(events: list[Event | None]) -> set[str]:
    """The scenarios whose records these events scored."""
    return {event.scenario for event in events if event is not None and event.type == "report" and event.scenario}


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
            subscription = self._daemon.bus.subscribe(types=[RECORD_EVENTS["report"]])
            try:
                while (event := await subscription.next()) is not None:
                    scenarios = _reported([event])
                    # Reports that arrived during the last check are looked at together: a burst of reports
                    # costs one check per scenario, not one per report (the test stays valid for any looks).
                    queued: list[Event | None] = []
                    while not subscription.queue.empty():
                        queued.append(subscription.queue.get_nowait())
                    scenarios.update(_reported(queued))
                    for scenario in sorted(scenarios):
                        await self._check(scenario)
                    if None in queued:
                        break
            finally:
                subscription.close()

    async def _check(self, scenario: str) -> None:
        try:
            await check_canary(self._daemon, scenario)
        except Exception:  # a failed check must not end the watch; the next report checks again
            log.exception("could not check the canary of %s", scenario)
