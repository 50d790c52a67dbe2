"""Starting a directory's daemon with another recipe: scenarios made under the old one keep it, the start says so,
`reef status` shows each scenario's recipe and steps, and `reef scenarios move` hands one to the new recipe."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli_testing import Daemon, start_daemon
from tests.support.waiting import eventually_sync

COUNTING = "tests.support.counting_recipe:CountingRecipe"


def test_a_scenario_made_under_another_recipe_is_named_at_start_and_can_be_moved(
    tmp_path: Path, upstream_url: str
) -> None:
    recording = start_daemon(tmp_path, upstream_url)
    try:
        receipts = [recording.chat("demo"), recording.chat("demo")]
    finally:
        recording.stop()

    started = recording.reef(
        "start", "--inference.upstream-url", upstream_url, "--reef.port", "0", "--recipe", COUNTING
    )
    assert started.returncode == 0, started.stderr
    assert "demo (record)" in started.stdout and "reef scenarios move demo" in started.stdout
    daemon = Daemon(tmp_path, (tmp_path / ".reef" / "daemon.url").read_text().strip(), recording.env)
    try:
        for receipt in receipts:
            assert daemon.reef("score", receipt, "1").returncode == 0
        before = daemon.reef("status")
        assert "no step yet" in before.stdout and "demo (record)" in before.stdout

        moved = daemon.reef("scenarios", "move", "demo")
        assert moved.returncode == 0, moved.stderr
        assert "moved scenario demo from record to recipe counting" in moved.stdout

        # The new recipe reads the records already there: the two scored reports make one step.
        steps = eventually_sync(
            lambda: daemon.get("/reef/status")["training"]["scenarios"].get("demo", {}).get("steps"),
            60,
            "the moved scenario's first step",
        )
        assert steps == 1
        after = daemon.reef("status")
        assert "on, last step 1 (demo)" in after.stdout and "reef scenarios move" not in after.stdout
        assert "already has recipe counting" in daemon.reef("scenarios", "move", "demo").stdout
    finally:
        daemon.stop()
