"""One-key scores: what each key sends to the daemon. The help screen prints this table, so it is the one place
the mapping is written down."""

from __future__ import annotations

# Keys 1 to 5 spread evenly over 0 to 1; + and - are the extremes.
KEY_SCORES: dict[str, float] = {"1": 0.0, "2": 0.25, "3": 0.5, "4": 0.75, "5": 1.0, "plus": 1.0, "minus": 0.0}
KEY_LABELS: dict[str, str] = {"plus": "+", "minus": "-"}


def score_table() -> list[tuple[str, float]]:
    """(key as a person types it, score sent) for every scoring key, in the order the help screen shows them."""
    return [(KEY_LABELS.get(key, key), score) for key, score in KEY_SCORES.items()]
