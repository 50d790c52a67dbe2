"""The versions screen's words for live scores: the cell (mean and trend), the selected version's line and the
running canary's line."""

from __future__ import annotations

from typing import Any

from reef_client.render.formats import timestamp
from reef_tui.version_scores import canary_line, live_cell, live_summary
from tests.support.tui_fixed import T0, version_scores


def test_a_version_sessions_ran_shows_its_mean_trend_and_details() -> None:
    live: Any = version_scores("reefine")
    assert live_cell(live, "r1") == "0.71     ▅▆▆▆▆▇▆▇"  # empty windows before v1 served, then rising
    assert live_summary(live, "r1") == (
        "live: 21 sessions, 48 of 50 records scored, mean 0.71 [0.63, 0.79] (95% interval), 29% low"
    )


def test_a_version_no_session_ran_shows_a_dash_and_no_details() -> None:
    live: Any = version_scores("reefine")
    assert live_cell(live, "r9") == "-" and live_summary(live, "r9") == ""
    assert live_cell(None, "r1") == "-" and live_summary(None, "r1") == ""


def test_the_running_canary_is_worded_beside_the_served_version() -> None:
    live: Any = version_scores("reefine")
    since = timestamp(T0 + 7300)  # in the machine's zone, as the screen shows it
    assert canary_line(live, {"r1": "v1", "r2": "v2"}) == (
        f"canary v2: 20% of new sessions since {since} · live 0.58 [0.50, 0.66] vs served v1 0.71 [0.63, 0.79]"
    )
    live["versions"] = []  # no tagged session ran either: what runs, no scores
    assert canary_line(live, {}) == f"canary v2: 20% of new sessions since {since}"


def test_no_canary_no_line() -> None:
    assert canary_line(version_scores("sao"), {}) == "" and canary_line(None, {}) == ""
