"""The install script run by `sh` in a temporary home: files, checksum, sidecar, idempotence, refusals, and failures
that become a script saying why."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import httpx
import pytest

from reef_daemon.harness.install import framed_checksum
from tests.support.adapters_testing import MODEL, SCENARIO, Reefine, installed_files


@pytest.fixture
def reefine(shared_reefine: Reefine, home: Path) -> Reefine:
    """The module's daemon, at this test's own home: these tests install and refuse, and change nothing of it (the
    ones that publish, restart or add a scenario are in test_install_changes.py)."""
    return shared_reefine.at_home(home)


def mtimes(root: Path) -> dict[str, int]:
    return {str(path): path.stat().st_mtime_ns for path in root.rglob("*")}


def test_install_writes_files_checksum_sidecar_and_wrapper(reefine: Reefine) -> None:
    done = reefine.install("pi")
    assert done.returncode == 0, done.stderr
    root = reefine.root()
    assert "installed pi harness v0 (release " in done.stdout and str(root) in done.stdout
    assert "warning" not in done.stderr  # ~/.local/bin is on PATH and the daemon has no auth

    sidecar = json.loads((root / ".reef-harness-release").read_text())
    assert sidecar["scenario"] == SCENARIO and sidecar["version"] == "v0" and sidecar["adapter"] == "pi"
    served = reefine.call("GET", "/reef/harness")
    assert sidecar["release_id"] == served["release_id"] and sidecar["url"] == reefine.url
    files = installed_files(root)
    assert sidecar["checksum"] == framed_checksum(files)
    assert "pi-agent/extensions/reef-requests.ts" in files
    provider = json.loads(files["pi-agent/models.json"])["providers"]["reef"]
    assert provider["baseUrl"] == reefine.url + "/v1" and provider["models"] == [{"id": MODEL}]
    assert provider["headers"]["x-reef-scenario"] == SCENARIO and provider["apiKey"] == "REEF_TOKEN"
    settings = json.loads(files["pi-agent/settings.json"])
    assert settings["defaultProvider"] == "reef" and settings["defaultModel"] == MODEL

    stub = root / "reef-pi"
    assert stub.stat().st_mode & stat.S_IXUSR
    assert (reefine.home / ".local" / "bin" / "reef-pi").resolve() == stub
    assert "-m adapters.wrapper pi" in stub.read_text()


def test_a_second_run_is_already_current_and_writes_nothing(reefine: Reefine) -> None:
    script = reefine.script("codex")
    assert reefine.install("codex", script=script).returncode == 0
    before = mtimes(reefine.root("codex"))
    again = reefine.install("codex", script=script)
    assert again.returncode == 0 and "already current: codex harness v0" in again.stdout
    assert mtimes(reefine.root("codex")) == before


def test_refusals_say_why_and_write_nothing(reefine: Reefine, tmp_path: Path) -> None:
    repo = reefine.home / "repo"
    (repo / ".git").mkdir(parents=True)
    refused = reefine.install("pi", str(repo / "harness"))
    assert refused.returncode == 1 and f"inside the git work tree {repo}" in refused.stderr

    work = reefine.home / "work"
    work.mkdir()
    for adapter in ("pi", "claude", "opencode"):
        refused = reefine.install(adapter, "harness", cwd=work)
        assert refused.returncode == 1 and "inside the current directory" in refused.stderr
        refused = reefine.install(adapter, str(repo / "harness"))
        assert refused.returncode == 1 and f"inside the git work tree {repo}" in refused.stderr
    assert not (work / "harness").exists() and not (repo / "harness").exists()

    (reefine.home / "t").mkdir()
    for adapter in ("codex", "dsh", "claude"):
        refused = reefine.install(adapter, "/tmp/reef-harness-refused")
        assert refused.returncode == 1 and f"which {adapter}'s sandbox lets commands write" in refused.stderr
        refused = reefine.install(adapter, str(reefine.home / "t" / "h"), TMPDIR=str(reefine.home / "t"))
        assert refused.returncode == 1 and "sandbox lets commands write" in refused.stderr
    assert not Path("/tmp/reef-harness-refused").exists() and not (reefine.home / "t" / "h").exists()
    assert reefine.install("pi", str(tmp_path / "pi")).returncode == 0  # pi has no such sandbox: /tmp is fine


def test_installs_of_several_adapters_sit_side_by_side_and_each_wrapper_keeps_working(reefine: Reefine) -> None:
    assert reefine.install("pi").returncode == 0
    pi_files = installed_files(reefine.root("pi"))
    for adapter in ("codex", "claude"):
        done = reefine.install(adapter)
        assert done.returncode == 0 and "removed" not in done.stdout, done.stdout + done.stderr
        assert str(reefine.root(adapter)) in done.stdout
        assert json.loads((reefine.root(adapter) / ".reef-harness-release").read_text())["adapter"] == adapter
    assert installed_files(reefine.root("pi")) == pi_files
    for adapter in ("pi", "codex", "claude"):
        link = reefine.home / ".local" / "bin" / f"reef-{adapter}"
        assert link.resolve() == reefine.root(adapter) / f"reef-{adapter}"
        doctor = reefine.wrapper(adapter, "doctor")
        assert "ok installed v0 is the served version" in doctor.stdout, doctor.stdout + doctor.stderr
    assert reefine.wrapper("pi", REEF_HARNESS_BINARY="/bin/true").returncode == 0


def test_a_root_holding_another_adapters_install_is_refused(reefine: Reefine) -> None:
    held = reefine.home / "held"
    assert reefine.install("pi", str(held)).returncode == 0
    before = installed_files(held)
    refused = reefine.install("claude", str(held))
    assert refused.returncode == 1, refused.stdout
    assert "it holds the pi harness, and installing claude there would remove its files" in refused.stderr
    assert f"pass a root of its own as the first argument, or none for {reefine.root('claude')}" in refused.stderr
    assert installed_files(held) == before and "removed" not in refused.stdout


def test_an_install_in_the_scenarios_folder_itself_keeps_its_place(reefine: Reefine) -> None:
    # Installs made when the scenario's folder was the root of its one adapter.
    legacy = reefine.root().parent
    assert reefine.install("pi", str(legacy)).returncode == 0
    again = reefine.install("pi")
    assert again.returncode == 0 and "already current: pi harness v0 (release" in again.stdout
    assert str(legacy) in again.stdout and not reefine.root("pi").exists()
    assert reefine.install("codex").returncode == 0 and installed_files(reefine.root("codex"))
    assert (reefine.home / ".local" / "bin" / "reef-pi").resolve() == legacy / "reef-pi"


@pytest.mark.parametrize(
    "link", ["pi-agent", "pi-agent/extensions", "pi-agent/extensions/reef-requests.ts", ".reef-token.new"]
)
def test_a_link_inside_the_root_is_refused_and_nothing_is_written_through_it(
    reefine: Reefine, tmp_path: Path, link: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    (root / link).parent.mkdir(parents=True, exist_ok=True)
    (root / link).symlink_to(outside)
    refused = reefine.install("pi", str(root), REEF_TOKEN="a-token")
    assert refused.returncode == 1
    assert f"refusing {root}: {root / link} is a symbolic link" in refused.stderr
    assert "remove the link and run this again" in refused.stderr
    assert list(outside.iterdir()) == []
    assert not (root / ".reef-harness-release").exists()


def test_a_folder_replaced_by_a_link_after_an_install_is_refused_on_update(reefine: Reefine, tmp_path: Path) -> None:
    assert reefine.install("pi").returncode == 0
    extensions = reefine.root() / "pi-agent" / "extensions"
    outside = tmp_path / "outside"
    extensions.rename(outside)
    extensions.symlink_to(outside)
    (outside / "reef-requests.ts").write_text("changed\n")
    refused = reefine.install("pi")
    assert refused.returncode == 1 and f"{extensions} is a symbolic link" in refused.stderr
    assert (outside / "reef-requests.ts").read_text() == "changed\n"


def test_failures_become_a_script_that_says_why(reefine: Reefine) -> None:
    for params, reason in (
        ({"adapter": "vim"}, "unknown adapter 'vim'; accepted: pi, codex, dsh, claude, opencode"),
        ({}, "say which agent to install for"),
        ({"adapter": "pi", "release_id": "0" * 40}, "no release"),
    ):
        response = httpx.get(reefine.url + "/reef/harness/install", params=params, headers=reefine.headers())
        assert response.status_code == 200 and response.headers["x-reef-install-error"]
        done = reefine.install("pi", script=response.text)
        assert done.returncode == 1 and reason in done.stderr
        assert "reef: the harness install failed" in done.stderr
