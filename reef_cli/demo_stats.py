"""The statistics of `reef demo sao`: held-out changes with 95 % intervals, by bootstrap over seeds and questions.

An evaluation is a score per held-out question and sample; before and after use the same questions and sampling
seeds, so a change is paired: per question, the mean over its samples of after - before. A seed's change is the mean
over questions; an arm's, the mean over seeds. Intervals resample the seeds (with replacement) and, within each, the
questions; a difference between two arms resamples both with the same draws, so it stays paired.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

RESAMPLES = 2000
LEVEL = 0.95

# per seed, per question: the mean over samples of after - before
Changes = Sequence[Sequence[float]]


@dataclass(frozen=True)
class Estimate:
    """A mean change and its 95 % bootstrap interval."""

    value: float
    low: float
    high: float

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def text(self) -> str:
        return f"{self.value:+.3f} [{self.low:+.3f}, {self.high:+.3f}]"


def question_changes(before: Sequence[Sequence[float]], after: Sequence[Sequence[float]]) -> list[float]:
    """Per question, the mean over its samples of after - before (scores per question, samples in the same order)."""
    return [
        statistics.fmean(a - b for a, b in zip(now, was, strict=True)) for was, now in zip(before, after, strict=True)
    ]


def _mean_of(changes: Changes, seeds: Sequence[int], questions: Sequence[Sequence[int]]) -> float:
    return statistics.fmean(
        statistics.fmean(changes[seed][q] for q in picked) for seed, picked in zip(seeds, questions, strict=True)
    )


def _bootstrap(statistic: Callable[[Sequence[int], Sequence[Sequence[int]]], float], shape: Changes) -> list[float]:
    draw = random.Random(0)  # the same run gives the same interval
    seeds, values = len(shape), []
    for _ in range(RESAMPLES):
        picked = [draw.randrange(seeds) for _ in range(seeds)]
        questions = [[draw.randrange(len(shape[seed])) for _ in shape[seed]] for seed in picked]
        values.append(statistic(picked, questions))
    return sorted(values)


def _estimate(value: float, values: list[float]) -> Estimate:
    tail = (1 - LEVEL) / 2
    low = values[int(tail * (len(values) - 1))]
    high = values[round((1 - tail) * (len(values) - 1))]
    return Estimate(value, low, high)


def change(changes: Changes) -> Estimate:
    """The mean change over seeds and questions, with its interval."""
    every = [list(range(len(per_seed))) for per_seed in changes]
    value = _mean_of(changes, range(len(changes)), every)
    return _estimate(value, _bootstrap(lambda s, q: _mean_of(changes, s, q), changes))


def difference(first: Changes, second: Changes) -> Estimate:
    """The first arm's mean change minus the second's (the same seeds and questions), with its paired interval."""
    every = [list(range(len(per_seed))) for per_seed in first]
    seeds = range(len(first))
    value = _mean_of(first, seeds, every) - _mean_of(second, seeds, every)
    return _estimate(value, _bootstrap(lambda s, q: _mean_of(first, s, q) - _mean_of(second, s, q), first))
