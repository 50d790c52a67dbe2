"""How the versions screen words a version's live scores: a cell with the mean and a sparkline of the score over
time, a line for the selected version's details, and a line for the running canary beside the served version."""

from __future__ import annotations

from reef_client import VersionScore, VersionScores
from reef_client.render.formats import MISSING, timestamp
from reef_client.render.live_scores import mean_text, sparkline


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


def canary_line(live: VersionScores | None, versions: dict[str, str]) -> str:
    """`canary v2: 20% of new sessions since 2026-01-01 14:01:40 · live 0.58 [0.50, 0.66] vs served v1 0.71 [0.63,
    0.79]`; empty when no canary runs. `versions` names releases by id; the live part only where sessions scored."""
    canary = live["canary"] if live else None
    if live is None or canary is None:
        return ""
    line = f"canary {canary['version']}: {canary['share']:g}% of new sessions since {timestamp(canary['started_at'])}"
    ours, theirs = _score(live, canary["release_id"]), _score(live, canary["served_release_id"])
    if ours is None and theirs is None:
        return line
    served = versions.get(canary["served_release_id"], canary["served_release_id"][:8])
    ours_text = mean_text(ours) if ours else MISSING
    theirs_text = mean_text(theirs) if theirs else MISSING
    return f"{line} · live {ours_text} vs served {served} {theirs_text}"
