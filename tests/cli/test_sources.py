"""`reef status` and `reef sources` show each derived source's agreement with people's scores; `reef sources enable`
counts a source that agreement switched off again."""

from __future__ import annotations

import json
from collections.abc import Callable

from typer.testing import Result

from tests.support.cli_testing import Daemon

Cli = Callable[..., Result]
SHARED = 20  # reports.min-agreement-records by default


def test_a_distrusted_source_shows_in_status_and_is_enabled_again(daemon: Daemon, cli: Cli) -> None:
    for n in range(SHARED):
        receipt = daemon.chat("trust")
        person = 1.0 if n % 2 else 0.0
        judged = {"score": 1.0 - person, "references": [receipt], "source": "judge", "evidence": {"n": n}}
        daemon.post("/reef/report", judged, scenario="trust")
        daemon.post("/reef/report", {"score": person, "references": [receipt]}, scenario="trust")

    status = cli("status")
    assert status.exit_code == 0, status.output
    assert "sources against people's scores" in status.stdout
    (row,) = [line for line in status.stdout.splitlines() if "trust" in line and "judge" in line]
    assert f"{SHARED}" in row and "-1.00" in row and "no: its agreement with people's scores is κ -1.00" in row

    listed = json.loads(cli("sources", "--json").stdout)
    assert listed["trust"]["judge"]["counts"] is False and listed["trust"]["judge"]["shared"] == SHARED

    enabled = cli("sources", "enable", "judge", "--scenario", "trust")
    assert enabled.exit_code == 0, enabled.output
    assert f"judge counts again in trust (κ -1.00 on {SHARED} shared records)" in enabled.stdout
    shown = cli("sources")
    assert "yes (a person turned it back on)" in shown.stdout

    refused = cli("sources", "enable", "person", "--scenario", "trust")
    assert refused.exit_code == 1 and "not a derived source" in refused.stderr
