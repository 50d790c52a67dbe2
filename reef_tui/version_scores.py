"""How the versions screen words a version's live scores: a cell with the mean and a sparkline of the score over
time, and a line for the selected version's details."""

from __future__ import annotations

from reef_cli.client import VersionScore, VersionScores
from reef_cli.render.formats import MISSING
from reef_cli.render.live_scores import mean_text, sparkline


def _score(live: VersionScores | None, release_id: str | None) -> VersionScore | None:
    if live is None or release_id is None:
        return None
    return next((score for score in live["versions"] if score["release_id"] == release_id), None)


def live_cell(live: VersionScores | None, release_id: str | None) -> str:
    """`0.74 ▇ ▆▇▃ █`: the mean score of the version's scored records, then its trend; a dash when none."""
    score = _score(live, release_id)
    if live is None or score is None or score["mean"] is None:
        return MISSING
    return f"{score['mean']:.2f} {sparkline(score['trend'], live['score_min'], live['score_max'])}"


def live_summary(live: VersionScores | None, release_id: str | None) -> str:
    """`live: 3 sessions, 5 of 6 records scored, mean 0.74 [0.40, 1.00], 20% low`; empty when no session ran it."""
    score = _score(live, release_id)
    if score is None:
        return ""
    low = "" if score["low_share"] is None else f", {score['low_share']:.0%} low"
    mean = "" if score["mean"] is None else f", mean {mean_text(score)} (95% interval)"
    return f"live: {score['sessions']} sessions, {score['scored']} of {score['records']} records scored{mean}{low}"
