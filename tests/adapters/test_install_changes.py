"""The install script against a daemon that changes under it: a new release prunes, a restart moves the binding, a
second scenario takes over the wrapper, a daemon with a token."""

from __future__ import annotations

import stat
from pathlib import Path

from tests.support.adapters_testing import SCENARIO, Reefine, installed_files, start_reefine, stop_reefine


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
