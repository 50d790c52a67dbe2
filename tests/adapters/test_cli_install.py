"""`reef install` runs the daemon's install script for this machine; `reef versions` then marks the install."""

from __future__ import annotations

import subprocess
import sys

from tests.support.adapters_testing import SCENARIO, Reefine


def reef(reefine: Reefine, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reef_cli", *args, "--url", reefine.url],
        cwd=reefine.home,
        env=reefine.env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_reef_install_writes_the_harness_and_the_wrapper(reefine: Reefine) -> None:
    done = reef(reefine, "install", "--adapter", "codex", "--scenario", SCENARIO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "installed codex harness v0" in done.stdout
    assert (reefine.root("codex") / "codex" / "skills" / "reefine" / "SKILL.md").exists()
    assert (reefine.home / ".local" / "bin" / "reef-codex").resolve() == reefine.root("codex") / "reef-codex"

    listed = reef(reefine, "versions", "--scenario", SCENARIO)
    assert listed.returncode == 0 and "installed, current" in listed.stdout

    elsewhere = reefine.home / "elsewhere"
    done = reef(reefine, "install", "--adapter", "pi", "--scenario", SCENARIO, "--root", str(elsewhere))
    assert done.returncode == 0 and (elsewhere / "pi-agent" / "models.json").exists()
    refused = reef(reefine, "install", "--adapter", "dsh", "--scenario", SCENARIO, "--root", "/tmp/reef-h")
    assert refused.returncode == 1 and "sandbox lets commands write" in refused.stderr


def test_reef_install_knows_claude_and_opencode(reefine: Reefine) -> None:
    for adapter, command in (
        ("claude", "claude/commands/reefine.md"),
        ("opencode", "opencode/config/opencode/command/reefine.md"),
    ):
        done = reef(reefine, "install", "--adapter", adapter, "--scenario", SCENARIO)
        assert done.returncode == 0, done.stdout + done.stderr
        root = reefine.root(adapter)  # each adapter's install has a root of its own
        assert f"installed {adapter} harness v0" in done.stdout and (root / command).is_file()
        assert (reefine.home / ".local" / "bin" / f"reef-{adapter}").resolve() == root / f"reef-{adapter}"
        assert not (root / ".reef-token").exists()  # the daemon has no auth here
    listed = reef(reefine, "versions", "--scenario", SCENARIO)
    assert listed.returncode == 0 and "installed, current" in listed.stdout


def test_reef_install_refusals_name_its_own_root_option(reefine: Reefine) -> None:
    held = reefine.home / "held"
    assert reef(reefine, "install", "--adapter", "pi", "--scenario", SCENARIO, "--root", str(held)).returncode == 0
    refused = reef(reefine, "install", "--adapter", "claude", "--scenario", SCENARIO, "--root", str(held))
    assert refused.returncode == 1 and "pass a root of its own with --root, or none for" in refused.stderr
    assert "first argument" not in refused.stderr
