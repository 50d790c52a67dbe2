"""Cohen's κ between two raters who each call an item low or high: how much more often they agree than two raters
who called low and high as often, at random, would. 1: always the same; 0: no better than chance; below 0: worse
(a source that scores the opposite of people's comes near -1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple


class Agreement(NamedTuple):
    shared: int  # items both rated
    kappa: float | None  # None when undefined: no items, or both raters gave one same call to every item


def kappa(pairs: Sequence[tuple[bool, bool]]) -> Agreement:
    """κ over `pairs` of (first rater's call is high, second's is high)."""
    n = len(pairs)
    if n == 0:
        return Agreement(0, None)
    observed = sum(first == second for first, second in pairs) / n
    first_high = sum(first for first, _ in pairs) / n
    second_high = sum(second for _, second in pairs) / n
    chance = first_high * second_high + (1 - first_high) * (1 - second_high)
    if chance >= 1:
        return Agreement(n, None)
    return Agreement(n, round((observed - chance) / (1 - chance), 4))
