"""`reef versions` with live scores, `reef promote --canary` and `reef rollback` without a version, against a
running reefine daemon."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reef_cli.app import app
from tests.reefine.test_live_scores import served_and_pending, session_call
from tests.support.reefine_testing import Reefine


async def reef(reefine: Reefine, *args: str) -> tuple[int, str]:
    """Run the CLI in a thread: it blocks on HTTP while this loop serves the daemon."""
    result = await asyncio.to_thread(CliRunner().invoke, app, [*args, "--url", reefine.url])
    return result.exit_code, result.output


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home"


async def test_versions_show_live_scores_and_a_canary_starts_and_ends(reefine: Reefine) -> None:
    v1, v2 = await served_and_pending(reefine)
    for index, score in enumerate([0.9, 0.7, 0.8, 0.3, 1.0]):
        await session_call(reefine, v1, f"s{index % 3}", score)

    code, output = await reef(reefine, "versions", "--scenario", "harness")
    assert code == 0, output
    assert "live scores of tagged sessions" in output
    header = next(line for line in output.splitlines() if "sessions" in line and "scored" in line)
    assert header.split() == ["version", "sessions", "records", "scored", "mean", "[95%", "CI]", "low", "trend"]
    row = next(line for line in output.splitlines() if line.split()[:1] == ["v1"] and "[" in line)
    assert row.split()[1:8] == ["3", "5", "5", "0.74", "[0.40,", "1.00]", "20%"]
    assert "95% intervals (student-t); low = below 0.5 on 0..1" in output
    spend = next(line for line in output.splitlines() if line.split()[:1] == ["v1"] and "unpriced" in line)
    assert spend.split()[1:] == ["5", "0.74", "unpriced", "(5)"]  # the test model has no price: not $0

    code, output = await reef(reefine, "promote", "--scenario", "harness", "--canary", "20", "v2")
    assert code == 0 and "canary: v2 serves 20% of new sessions beside the served version" in output, output
    promote_hint, rollback_hint = (hint.split() for hint in re.findall(r"`reef ([^`]+)`", output))
    await session_call(reefine, v2, "c1", 0.4)
    code, output = await reef(reefine, "versions", "--scenario", "harness")
    assert code == 0 and "pending, canary 20%" in output
    assert any(line.split()[:4] == ["v2", "canary", "20%", "1"] for line in output.splitlines())
    code, output = await reef(reefine, "versions", "--scenario", "harness", "--json")
    shown = json.loads(output)
    assert shown["live"]["canary"]["version"] == "v2"
    live = {row["version"]: row["live"] for row in shown["releases"]}
    assert live["v1"]["scored"] == 5 and live["v2"]["mean"] == 0.4 and live["v0"] is None

    code, output = await reef(reefine, *rollback_hint)  # as the canary's line printed it
    assert code == 0 and "ended the canary of v2: every new session runs the served version" in output
    assert promote_hint == ["promote", "--scenario", "harness", "v2"]
    code, output = await reef(reefine, "rollback", "--scenario", "harness")
    assert code == 2 and "no canary runs in harness; name a version to roll back to" in output
