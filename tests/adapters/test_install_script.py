"""The install script run by `sh` in a temporary home: files, checksum, sidecar, idempotence, pruning, binding
rewrite, refusals, the token, and failures that become a script saying why."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import httpx
import pytest

from reef_daemon.harness.install import framed_checksum
from tests.support.adapters_testing import MODEL, SCENARIO, Reefine, start_reefine, stop_reefine


def installed_files(root: Path) -> dict[str, str]:
    sidecar = json.loads((root / ".reef-harness-release").read_text())
    return {path: (root / path).read_text() for path in sidecar["files"]}


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


def test_a_new_release_adds_files_and_an_older_one_prunes_them(reefine: Reefine) -> None:
    assert reefine.install("dsh").returncode == 0
    progress = reefine.publish_skill("haiku", "# Haiku\nAnswer in a haiku.")
    updated = reefine.install("dsh")
    assert updated.returncode == 0 and "harness v1" in updated.stdout, updated.stderr
    skill = reefine.root("dsh") / "dsh" / "skills" / "haiku" / "SKILL.md"
    assert "Answer in a haiku." in skill.read_text()

    v0 = reefine.call("GET", f"/reef/scenarios/{SCENARIO}/releases")["releases"][-1]["release_id"]
    rolled = reefine.install("dsh", script=reefine.script("dsh", release_id=v0))
    assert rolled.returncode == 0 and "removed dsh/skills/haiku/SKILL.md" in rolled.stdout
    assert not skill.exists() and not skill.parent.exists()
    assert progress["release"] not in (reefine.root("dsh") / ".reef-harness-release").read_text()


def test_the_binding_follows_the_daemon_url_and_model(reefine: Reefine, tmp_path: Path) -> None:
    assert reefine.install("codex").returncode == 0
    forwarded = {"x-forwarded-host": "reef.example:9443", "x-forwarded-proto": "https", **reefine.headers()}
    moved = reefine.install("codex", script=reefine.script("codex", headers=forwarded))
    assert moved.returncode == 0 and "already current" not in moved.stdout
    config = (reefine.root("codex") / "codex" / "config.toml").read_text()
    assert 'base_url = "https://reef.example:9443/v1"' in config

    stop_reefine(tmp_path, reefine)
    restarted = start_reefine(tmp_path, reefine.upstream, reefine.home, model="another-model")
    try:
        rebound = restarted.install("codex")
        assert rebound.returncode == 0, rebound.stderr
        config = (restarted.root("codex") / "codex" / "config.toml").read_text()
        assert 'model = "another-model"' in config and f'base_url = "{restarted.url}/v1"' in config
    finally:
        stop_reefine(tmp_path, restarted)
        reefine.url = restarted.url  # the fixture stops whichever daemon is running


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


def test_installing_a_second_scenario_says_that_the_wrapper_now_runs_it(reefine: Reefine) -> None:
    assert reefine.install("pi").returncode == 0
    reefine.call("POST", "/reef/scenarios", {"name": "other"})
    done = reefine.install("pi", script=reefine.script("pi", headers=reefine.headers("other")))
    assert done.returncode == 0, done.stderr
    link = reefine.home / ".local" / "bin" / "reef-pi"
    assert link.resolve() == reefine.root("pi", "other") / "reef-pi"
    assert (
        f"{link} now runs this harness (other, in {reefine.root('pi', 'other')}); it ran"
        f" {reefine.root('pi') / 'reef-pi'}, which still runs by that path"
    ) in done.stdout
    again = reefine.install("pi", script=reefine.script("pi", headers=reefine.headers("other")))
    assert again.returncode == 0 and "now runs" not in again.stdout


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


def test_with_auth_the_token_comes_from_the_shell_and_never_from_the_script(
    tmp_path: Path, upstream: object, home: Path
) -> None:
    token = "reef-test-token-5b1f0c"
    reefine = start_reefine(tmp_path, upstream, home, token=token)  # type: ignore[arg-type]
    try:
        script = reefine.script("pi")
        assert token not in script
        warned = reefine.install("pi", script=script)
        assert warned.returncode == 0 and "REEF_TOKEN is unset here" in warned.stderr
        saved = reefine.install("pi", script=script, REEF_TOKEN=token)
        assert saved.returncode == 0 and "saved REEF_TOKEN" in saved.stdout
        token_file = reefine.root() / ".reef-token"
        assert token_file.read_text().strip() == token and stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert all(token not in text for text in installed_files(reefine.root()).values())
        assert token not in (reefine.root() / ".reef-harness-release").read_text()
        assert "already current" in reefine.install("pi", script=script, REEF_TOKEN=token).stdout
    finally:
        stop_reefine(tmp_path, reefine)
