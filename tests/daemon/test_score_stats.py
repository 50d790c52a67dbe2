"""Live score statistics: the t quantile against the t distribution itself, a version's mean, 95% interval and low
share against a direct computation, and the auto-rollback rule: it fires on a canary that scores clearly worse
and not on noise (two samples of one distribution) nor before each side has enough scores."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from reef_daemon.contract import low_score_below
from reef_daemon.harness.score_stats import clearly_worse, describe, summarize_scores, t_975


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


def test_a_canary_that_scores_clearly_worse_is_rolled_back_once_each_side_has_enough_scores() -> None:
    rng = random.Random(7)
    served = summarize_scores([min(1.0, max(0.0, rng.gauss(0.8, 0.1))) for _ in range(30)], 0.5)
    worse = [min(1.0, max(0.0, rng.gauss(0.4, 0.1))) for _ in range(30)]
    assert clearly_worse(summarize_scores(worse, 0.5), served, min_scored=20)
    assert not clearly_worse(summarize_scores(worse[:19], 0.5), served, min_scored=20)  # too few yet
    assert not clearly_worse(served, summarize_scores(worse, 0.5), min_scored=20)  # better is never rolled back


def test_noise_does_not_roll_a_canary_back() -> None:
    """Canary and served drawn from one distribution: the intervals almost always overlap."""
    rng = random.Random(11)
    fired = 0
    for _ in range(300):
        served = summarize_scores([rng.random() for _ in range(25)], 0.5)
        canary = summarize_scores([rng.random() for _ in range(25)], 0.5)
        fired += clearly_worse(canary, served, min_scored=20)
    assert fired <= 3  # non-overlapping 95% intervals of equal means happen well under 1% of the time


def test_noise_checked_after_every_report_rarely_rolls_a_canary_back() -> None:
    """The daemon checks after each report: 40 looks per canary, still well under 2% of equal canaries roll back."""
    rng = random.Random(3)
    fired = 0
    for _ in range(400):
        served = summarize_scores([rng.random() for _ in range(60)], 0.5)
        canary: list[float] = []
        for _look in range(60):
            canary.append(rng.random())
            if clearly_worse(summarize_scores(canary, 0.5), served, min_scored=20):
                fired += 1
                break
    assert fired / 400 < 0.02
