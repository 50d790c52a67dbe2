"""Live score statistics: the t quantile against the t distribution itself, a version's mean, 95% interval and low
share against a direct computation, and the auto-rollback rule: it fires on a canary that scores clearly worse
and not before each side has enough scores, and rolls back at most 1% of canaries that score like the served
version although it is checked after every report (simulated canaries, seeded)."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable

import pytest

from reef_contract import low_score_below
from reef_daemon.harness.score_stats import (
    NO_SCORES,
    ScoreSums,
    clearly_worse,
    describe,
    rollback_evidence,
    summarize_scores,
    t_975,
)


def _t_cdf(x: float, df: int, steps: int = 20000) -> float:
    """P(T <= x) for Student's t, by Simpson's rule over the density from 0 (the density is symmetric)."""
    norm = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def density(t: float) -> float:
        return norm * (1 + t * t / df) ** (-(df + 1) / 2)

    h = x / steps
    total = density(0) + density(x) + sum((4 if i % 2 else 2) * density(i * h) for i in range(1, steps))
    return 0.5 + total * h / 3


@pytest.mark.parametrize("df", [1, 2, 5, 9, 29, 30, 31, 40, 60, 120, 1000])
def test_the_t_quantile_leaves_two_and_a_half_percent_in_each_tail(df: int) -> None:
    assert _t_cdf(t_975(df), df, steps=200000 if df == 1 else 20000) == pytest.approx(0.975, abs=2e-5)


def test_mean_interval_and_low_share_match_a_direct_computation() -> None:
    scores = [0.9, 0.4, 0.75, 0.6, 0.2, 1.0, 0.55, 0.8]
    summary = summarize_scores(scores, low_below=0.5)
    half = 2.364624252 * statistics.stdev(scores) / math.sqrt(len(scores))  # t(0.975, 7) from a printed table
    assert summary.scored == 8
    assert summary.mean == pytest.approx(statistics.mean(scores))
    assert summary.interval == pytest.approx((statistics.mean(scores) - half, statistics.mean(scores) + half))
    assert summary.low_share == pytest.approx(2 / 8)  # 0.4 and 0.2; 0.5 itself would not be low


def test_one_score_has_a_mean_but_no_interval_and_none_has_neither() -> None:
    one = summarize_scores([0.3], low_below=0.5)
    assert (one.mean, one.interval, one.low_share) == (0.3, None, 1.0)
    none = summarize_scores([], low_below=0.5)
    assert (none.scored, none.mean, none.interval, none.low_share) == (0, None, None, None)
    assert describe("v3", none) == "v3 has no scored records"
    assert describe("v3", summarize_scores([0.2, 0.4], 0.5)).startswith("v3 scored 0.3 [")


def test_low_is_below_the_middle_of_the_scale() -> None:
    assert low_score_below({"min": 0.0, "max": 1.0}) == 0.5
    assert low_score_below({"min": 1.0, "max": 5.0}) == 3.0


def sums_of(scores: list[float]) -> ScoreSums:
    total = NO_SCORES
    for score in scores:
        total = total.add(score)
    return total


def test_a_canary_that_scores_clearly_worse_is_rolled_back_once_each_side_has_enough_scores() -> None:
    rng = random.Random(7)
    served = sums_of([min(1.0, max(0.0, rng.gauss(0.8, 0.1))) for _ in range(30)])
    worse = [min(1.0, max(0.0, rng.gauss(0.4, 0.1))) for _ in range(30)]
    assert clearly_worse(sums_of(worse), served, min_scored=20, alpha=ALPHA)
    assert not clearly_worse(sums_of(worse[:19]), served, min_scored=20, alpha=ALPHA)  # too few yet
    assert not clearly_worse(served, sums_of(worse), min_scored=20, alpha=ALPHA)  # better is never rolled back


def test_constant_scores_give_evidence_only_when_the_canary_is_lower() -> None:
    assert rollback_evidence(sums_of([1.0] * 25), sums_of([1.0] * 25)) == 0.0
    assert rollback_evidence(sums_of([0.0] * 25), sums_of([1.0] * 25)) == math.inf
    assert rollback_evidence(sums_of([1.0] * 25), sums_of([0.0] * 25)) == 0.0


ALPHA = 0.005  # harness.canary-false-rollback's default
SHARE = 0.2


def watched_canary(rng: random.Random, draw: Callable[[random.Random], float], worse_by: float,
                   reports: int) -> int | None:  # fmt: skip
    """A canary checked after every report, as the daemon checks it: each report scores one record, the canary's
    with probability SHARE; the report after which it was rolled back, or None."""
    canary, served = NO_SCORES, NO_SCORES
    for report in range(1, reports + 1):
        if rng.random() < SHARE:
            canary = canary.add(max(0.0, draw(rng) - worse_by))
        else:
            served = served.add(draw(rng))
        if clearly_worse(canary, served, min_scored=20, alpha=ALPHA):
            return report
    return None


def uniform(rng: random.Random) -> float:
    return rng.random()


def binary(rng: random.Random) -> float:
    return 1.0 if rng.random() < 0.7 else 0.0


@pytest.mark.parametrize("draw", [uniform, binary])
def test_noise_checked_after_every_report_rolls_back_at_most_one_canary_in_a_hundred(
    draw: Callable[[random.Random], float],
) -> None:
    """Canary and served drawn from one distribution, checked after each of 1,000 reports: a test of fixed size
    looked at this often rolled back several percent of such canaries; the sequential test stays under 1%."""
    rng = random.Random(f"noise-{draw.__name__}")
    fired = sum(watched_canary(rng, draw, 0.0, 1000) is not None for _ in range(300))
    assert fired / 300 <= 0.01


def test_a_truly_worse_canary_is_caught_within_a_few_hundred_reports() -> None:
    rng = random.Random(5)
    ends = [watched_canary(rng, uniform, 0.2, 1000) for _ in range(40)]
    assert all(end is not None for end in ends)
    assert statistics.median(end for end in ends if end is not None) < 400
