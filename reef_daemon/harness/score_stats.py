"""The statistics of live scores: a version's mean score with a 95% confidence interval, the share of low scores,
and when a canary scores clearly worse than the served version.

The interval is Student's t with n-1 degrees of freedom (exact quantiles up to 30, the Cornish-Fisher expansion
beyond), so a handful of scores gets the wide interval it deserves; one score has a mean and no interval.

The rollback rule is checked after every report, so it must stay valid however often it looks: a fixed-sample test
(non-overlapping intervals) looked at after each of 2,000 reports rolls back several percent of canaries that are
no worse. It is instead a mixture sequential probability ratio test (mSPRT, Robbins 1970; Johari et al. 2017) on
the difference of the two means with the pooled variance: the likelihood ratio of "the canary differs by d"
against "no difference", averaged over d ~ N(0, (MIXTURE_EFFECT * sd)^2), is a martingale under no difference,
so (Ville's inequality) it ever reaches 1/alpha with probability at most alpha, however many looks.
`bench/canary_rollback.py` measures the false rollback rate and the time to catch a worse canary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

CONFIDENCE = 0.95
METHOD = "student-t"
# The 0.975 quantile of Student's t for 1..30 degrees of freedom.
_T_975 = (
    12.706204736, 4.302652730, 3.182446305, 2.776445105, 2.570581836, 2.446911851, 2.364624252, 2.306004135,
    2.262157163, 2.228138852, 2.200985160, 2.178812830, 2.160368656, 2.144786688, 2.131449546, 2.119905299,
    2.109815578, 2.100922040, 2.093024054, 2.085963447, 2.079613845, 2.073873068, 2.068657610, 2.063898562,
    2.059538553, 2.055529439, 2.051830516, 2.048407142, 2.045229642, 2.042272456,
)  # fmt: skip
_Z_975 = 1.959963984540054


def t_975(df: int) -> float:
    """The two-sided 95% critical value of Student's t with `df` (>= 1) degrees of freedom."""
    if df < 1:
        raise ValueError("Student's t needs at least one degree of freedom")
    if df <= len(_T_975):
        return _T_975[df - 1]
    z = _Z_975
    terms = (
        (z**3 + z) / 4,
        (5 * z**5 + 16 * z**3 + 3 * z) / 96,
        (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
        (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160,
    )
    return z + sum(term / float(df) ** (power + 1) for power, term in enumerate(terms))


@dataclass(frozen=True)
class ScoreSummary:
    """Scores of one version: how many, their mean, the 95% interval of the mean and the share below `low`."""

    scored: int
    mean: float | None
    interval: tuple[float, float] | None
    low_share: float | None


def summarize(scored: int, total: float, squares: float, low: int) -> ScoreSummary:
    """The summary from sums over the scores: their count, sum, sum of squares and how many were low."""
    if scored == 0:
        return ScoreSummary(0, None, None, None)
    mean = total / scored
    if scored == 1:
        return ScoreSummary(1, mean, None, low / scored)
    variance = max(0.0, (squares - scored * mean * mean) / (scored - 1))
    half = t_975(scored - 1) * math.sqrt(variance / scored)
    return ScoreSummary(scored, mean, (mean - half, mean + half), low / scored)


def summarize_scores(scores: list[float], low_below: float) -> ScoreSummary:
    """The summary of a list of scores (scores below `low_below` are low)."""
    return summarize(len(scores), sum(scores), sum(s * s for s in scores), sum(1 for s in scores if s < low_below))


@dataclass(frozen=True)
class ScoreSums:
    """Sums over one version's scores: how many, their sum and the sum of their squares."""

    scored: int
    total: float
    squares: float

    def add(self, score: float) -> ScoreSums:
        return ScoreSums(self.scored + 1, self.total + score, self.squares + score * score)


NO_SCORES = ScoreSums(0, 0.0, 0.0)
# The spread of the differences the test expects, in standard deviations of one score: it is most sensitive near
# a difference of this size and still catches larger ones quickly.
MIXTURE_EFFECT = 0.3


def rollback_evidence(canary: ScoreSums, served: ScoreSums) -> float:
    """The mSPRT's log likelihood ratio that the canary's mean is below the served one's (0.0: no evidence, as for
    a canary scoring as well or better, or fewer than two scores on a side)."""
    if canary.scored < 2 or served.scored < 2:
        return 0.0
    mean_c, mean_s = canary.total / canary.scored, served.total / served.scored
    if mean_c >= mean_s:
        return 0.0
    spread = (canary.squares - canary.scored * mean_c**2) + (served.squares - served.scored * mean_s**2)
    variance = max(0.0, spread / (canary.scored + served.scored - 2))
    if variance == 0.0:  # both sides constant and the canary lower: as strong as evidence gets
        return math.inf
    n_eff = 1 / (1 / canary.scored + 1 / served.scored)
    z_squared = (mean_c - mean_s) ** 2 * n_eff / variance
    mixed = n_eff * MIXTURE_EFFECT**2
    return max(0.0, z_squared * mixed / (2 * (1 + mixed)) - 0.5 * math.log1p(mixed))


def clearly_worse(canary: ScoreSums, served: ScoreSums, min_scored: int, alpha: float) -> bool:
    """Whether the canary scores clearly below the served version: each side has at least `min_scored` scores and
    the sequential test's evidence reaches log(1/alpha), which noise reaches in at most `alpha` of canaries, however
    often it is checked."""
    if canary.scored < min_scored or served.scored < min_scored:
        return False
    return rollback_evidence(canary, served) >= math.log(1 / alpha)


def describe(version: str, summary: ScoreSummary) -> str:
    """`v5 scored 0.31 [0.25, 0.37] over 24 scored records`, for events and messages."""
    if summary.mean is None:
        return f"{version} has no scored records"
    shown = f"{version} scored {summary.mean:.3g}"
    if summary.interval is not None:
        shown += f" [{summary.interval[0]:.3g}, {summary.interval[1]:.3g}]"
    return f"{shown} over {summary.scored} scored record(s)"
