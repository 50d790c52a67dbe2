"""One-key scores: what each key sends to the daemon. Keys 1 to 5 spread evenly over the daemon's score scale,
1 the worst and 5 the best; + and - are the best and the worst. The help screen, the palette and the toasts all
read this table, so it is the one place the mapping is written down."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from reef_contract import ScoreScale, Status

DEFAULT_SCALE: ScoreScale = {"min": 0.0, "max": 1.0}  # what a daemon that declares no scale accepts
KEY_FRACTIONS: dict[str, float] = {"1": 0.0, "2": 0.25, "3": 0.5, "4": 0.75, "5": 1.0, "plus": 1.0, "minus": 0.0}
KEY_LABELS: dict[str, str] = {"plus": "+", "minus": "-"}
# The line under an unscored record in the detail screen: the keys, where `reef show` names its CLI command.
SCORE_HINT = "not scored yet: press 1 (worst) to 5 (best), or f for feedback"


def scale_of(status: Status | None) -> ScoreScale:
    """The daemon's score scale, or 0 to 1 when it declares none (a daemon older than the setting) or has not
    answered yet."""
    scale = cast("Mapping[str, Any]", status).get("score_scale") if status else None
    if not isinstance(scale, dict) or not {"min", "max"} <= set(scale):
        return DEFAULT_SCALE
    return {"min": float(scale["min"]), "max": float(scale["max"])}


def key_score(key: str, scale: ScoreScale) -> float:
    """The score `key` sends on `scale`."""
    return scale["min"] + KEY_FRACTIONS[key] * (scale["max"] - scale["min"])


def key_meaning(key: str) -> str:
    """`worst` or `best` for the keys at the ends of the scale, else empty."""
    fraction = KEY_FRACTIONS[key]
    return "worst" if fraction == 0 else "best" if fraction == 1 else ""


def score_table(scale: ScoreScale) -> list[tuple[str, float, str]]:
    """(key as a person types it, score sent, worst/best/empty) for every scoring key, in the help screen's order."""
    return [(KEY_LABELS.get(key, key), key_score(key, scale), key_meaning(key)) for key in KEY_FRACTIONS]
