"""The versions screen's words for live scores: the cell (mean and trend) and the selected version's line."""

from __future__ import annotations

from typing import Any

from reef_tui.version_scores import live_cell, live_summary
from tests.support.tui_fixed import version_scores


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
