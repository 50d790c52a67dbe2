"""The wrapper's integrity check: a changed installed file, a file the install did not write where the agent loads
from, or a model binding moved away from reef stops it (exit 3, naming the file); the agent's own state does not,
and `update` puts the install back. `/bin/true` stands in for the agent here."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.adapters_testing import MODEL, REPO, Reefine


@pytest.fixture
def reefine(shared_reefine: Reefine, home: Path) -> Reefine:
    """The module's daemon, at this test's own home: installs, wrappers and sessions are the test's alone."""
    return shared_reefine.at_home(home)


def test_tampering_stops_the_wrapper_and_the_agents_own_state_does_not(reefine: Reefine) -> None:
    assert reefine.install("pi").returncode == 0
    root = reefine.root()
    agent = {"REEF_HARNESS_BINARY": "/bin/true"}
    assert reefine.wrapper("pi", **agent).returncode == 0

    # What pi itself writes: sessions, and its preference keys in settings.json.
    (root / "pi-agent" / "sessions").mkdir()
    (root / "pi-agent" / "sessions" / "one.jsonl").write_text('{"type": "session"}\n')
    settings_path = root / "pi-agent" / "settings.json"
    settings = json.loads(settings_path.read_text())
    settings_path.write_text(json.dumps({**settings, "theme": "light", "lastChangelogVersion": "9.9.9"}))
    assert reefine.wrapper("pi", **agent).returncode == 0

    extension = root / "pi-agent" / "extensions" / "reef-requests.ts"
    extension.write_text(extension.read_text() + "\n// changed by hand\n")
    settings_path.write_text(json.dumps({**settings, "extensions": ["/somewhere/else.ts"]}))
    refused = reefine.wrapper("pi", **agent)
    assert refused.returncode == 3
    assert "pi-agent/extensions/reef-requests.ts, pi-agent/settings.json" in refused.stderr
    assert "reef-pi update" in refused.stderr

    doctor = reefine.wrapper("pi", "doctor", **agent)
    assert doctor.returncode == 1 and "!! changed: pi-agent/extensions/reef-requests.ts" in doctor.stdout
    assert reefine.wrapper("pi", "update").returncode == 0
    assert reefine.wrapper("pi", **agent).returncode == 0
    assert (root / "pi-agent" / "sessions" / "one.jsonl").exists()


@pytest.mark.parametrize(
    ("adapter", "added", "own"),
    [
        ("pi", "pi-agent/extensions/evil.ts", "pi-agent/sessions/one.jsonl"),
        ("pi", "pi-agent/skills/evil/SKILL.md", "pi-agent/auth.json"),
        ("codex", "codex/skills/evil/SKILL.md", "codex/skills/.system/skill-creator/SKILL.md"),
        ("codex", "codex/AGENTS.override.md", "codex/sessions/one.jsonl"),
        ("dsh", "dsh/profiles/headless/evil.patch.yml", "dsh/profiles/headless/cordis.yml"),
        ("dsh", "dsh-agents/skills/evil/SKILL.md", "dsh/sessions/one.jsonl"),
        ("claude", "claude/commands/evil.md", "claude/projects/-home-project/one.jsonl"),
        ("claude", "claude/agents/evil.md", "claude/.claude.json"),
        ("opencode", "opencode/config/opencode/plugin/evil.ts", "opencode/data/opencode/opencode.db"),
        ("opencode", "opencode/config/opencode/agent/evil.md", "opencode/config/opencode/node_modules/x/index.js"),
    ],
)
def test_a_file_the_install_did_not_write_where_the_agent_loads_from_stops_the_wrapper(
    reefine: Reefine, adapter: str, added: str, own: str
) -> None:
    assert reefine.install(adapter).returncode == 0
    root = reefine.root(adapter)
    agent = {"REEF_HARNESS_BINARY": "/bin/true"}
    (root / own).parent.mkdir(parents=True, exist_ok=True)
    (root / own).write_text("what the agent writes itself\n")
    assert reefine.wrapper(adapter, **agent).returncode == 0

    (root / added).parent.mkdir(parents=True, exist_ok=True)
    (root / added).write_text("written by someone else\n")
    refused = reefine.wrapper(adapter, **agent)
    assert refused.returncode == 3
    assert f"{added} (not installed by reef)" in refused.stderr
    assert "remove the files reef did not install" in refused.stderr
    doctor = reefine.wrapper(adapter, "doctor", **agent)
    assert doctor.returncode == 1 and f"!! changed: {added} (not installed by reef)" in doctor.stdout
    (root / added).unlink()
    assert reefine.wrapper(adapter, **agent).returncode == 0


def test_a_linked_folder_where_pi_loads_extensions_stops_the_wrapper(reefine: Reefine, tmp_path: Path) -> None:
    assert reefine.install("pi").returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "evil.ts").write_text("export default function () {}\n")
    (reefine.root() / "pi-agent" / "extensions" / "more").symlink_to(elsewhere)
    refused = reefine.wrapper("pi", REEF_HARNESS_BINARY="/bin/true")
    assert refused.returncode == 3 and "pi-agent/extensions/more (not installed by reef)" in refused.stderr


@pytest.mark.parametrize(
    ("adapter", "path", "edit"),
    [
        ("pi", "pi-agent/settings.json", lambda text: text.replace('"reef"', '"anthropic"')),
        ("pi", "pi-agent/settings.json", lambda text: text.replace(f'"{MODEL}"', '"claude-sonnet-4"')),
        ("codex", "codex/config.toml", lambda text: text.replace('provider = "reef"', 'provider = "openai"')),
        ("codex", "codex/config.toml", lambda text: text.replace("http://", "https://elsewhere.example/")),
        ("dsh", "dsh/reef-binding.patch.yml", lambda text: text.replace("provider: reef", "provider: deepseek")),
        ("claude", "claude/settings.json", lambda text: text.replace("http://", "https://elsewhere.example/")),
        ("claude", "claude/settings.json", lambda text: text.replace('"DISABLE_TELEMETRY": "1"', '"X": "1"')),
        (
            "opencode",
            "opencode/config/opencode/opencode.json",
            lambda text: text.replace('"model": "reef/', '"model": "anthropic/'),
        ),
        ("opencode", "opencode/config/opencode/opencode.json", lambda text: text.replace("http://", "https://x.y/")),
    ],
)
def test_moving_the_model_binding_away_from_reef_stops_the_wrapper(
    reefine: Reefine, adapter: str, path: str, edit: Callable[[str], str]
) -> None:
    assert reefine.install(adapter).returncode == 0
    target = reefine.root(adapter) / path
    text = target.read_text()
    assert edit(text) != text
    target.write_text(edit(text))
    refused = reefine.wrapper(adapter, REEF_HARNESS_BINARY="/bin/true")
    assert refused.returncode == 3 and path in refused.stderr
    doctor = reefine.wrapper(adapter, "doctor", REEF_HARNESS_BINARY="/bin/true")
    assert doctor.returncode == 1 and f"!! changed: {path}" in doctor.stdout


def test_report_needs_a_recorded_session(reefine: Reefine) -> None:
    assert reefine.install("codex").returncode == 0
    assert reefine.wrapper("codex", REEF_HARNESS_BINARY="/bin/true").returncode == 0
    refused = reefine.wrapper("codex", "report", "--score", "1")
    assert refused.returncode == 1 and "no session with recorded model calls" in refused.stderr
    helped = reefine.wrapper("codex", "--help")
    assert helped.returncode == 0 and "report" in helped.stdout and "doctor" in helped.stdout


@pytest.mark.parametrize(
    ("adapter", "setting", "line"),
    [
        ("claude", "claude/settings.json", "nonessential traffic, telemetry and auto-update are off"),
        ("opencode", "opencode/config/opencode/opencode.json", "auto-update, sharing and the models fetch are off"),
    ],
)
def test_doctor_says_the_agent_reaches_only_reef_and_update_puts_a_tampered_install_back(
    reefine: Reefine, adapter: str, setting: str, line: str
) -> None:
    assert reefine.install(adapter).returncode == 0
    agent = {"REEF_HARNESS_BINARY": "/bin/true"}
    doctor = reefine.wrapper(adapter, "doctor", **agent)
    assert f"ok {line}" in doctor.stdout, doctor.stdout
    target = reefine.root(adapter) / setting
    quiet = target.read_text()
    target.write_text(
        quiet.replace('"DISABLE_AUTOUPDATER": "1"', '"DISABLE_AUTOUPDATER": "0"').replace("false", "true")
    )
    refused = reefine.wrapper(adapter, **agent)
    assert refused.returncode == 3 and setting in refused.stderr and f"reef-{adapter} update" in refused.stderr
    doctor = reefine.wrapper(adapter, "doctor", **agent)
    assert doctor.returncode == 1 and f"!! {setting} no longer" in doctor.stdout
    assert reefine.wrapper(adapter, "update").returncode == 0
    assert target.read_text() == quiet and reefine.wrapper(adapter, **agent).returncode == 0


@pytest.mark.parametrize("command", ["request", "evolve"])  # evolve: its old name, which older installs run
def test_request_wait_on_a_skipped_request_exits_1_without_a_traceback(reefine: Reefine, command: str) -> None:
    assert reefine.install("pi").returncode == 0
    # The scripted proposer's default answer writes nothing usable, so the request is skipped.
    skipped = reefine.wrapper("pi", command, "something vague", "--wait")
    assert skipped.returncode == 1, skipped.stdout + skipped.stderr
    assert "skipped" in skipped.stdout.splitlines()  # a skipped request makes no version
    assert "Traceback" not in skipped.stderr and "Exit" not in skipped.stderr
    assert re.match(r"request [0-9a-f]{32} queued; watching it for at most 30 min", skipped.stderr), skipped.stderr
    # The command it prints to keep waiting runs as printed, from a folder no daemon runs from.
    hint = re.search(r"it keeps running after that: (.+)\)$", skipped.stderr.splitlines()[0])
    assert hint is not None and f"--url {reefine.url}" in hint[1], skipped.stderr
    elsewhere = reefine.home / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    again = subprocess.run(
        hint[1], shell=True, cwd=elsewhere, env=reefine.env, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 1 and "skipped" in again.stdout.splitlines(), again.stdout + again.stderr


def test_the_wrapper_finds_the_agent_scripts_setup_installed_when_path_lacks_it(reefine: Reefine) -> None:
    installed = REPO / ".tools" / "node_modules" / ".bin" / "pi"
    assert installed.exists(), "scripts/setup installs pi into .tools/node_modules/.bin"
    assert reefine.install("pi").returncode == 0
    path = ":".join([str(reefine.home / ".local" / "bin"), "/usr/local/bin", "/usr/bin", "/bin"])
    doctor = reefine.wrapper("pi", "doctor", PATH=path)
    assert f"at {installed}" in doctor.stdout, doctor.stdout + doctor.stderr


def test_reef_pi_starts_pi_without_its_start_up_downloads_unless_the_person_asks(reefine: Reefine) -> None:
    """pi fetches fd and ripgrep at each start where they are missing, waiting on the network when there is none:
    the wrapper starts it offline (PI_OFFLINE=1); a PI_OFFLINE the person set wins."""
    assert reefine.install("pi").returncode == 0
    seen = reefine.home / "offline.txt"
    agent = reefine.home / "agent.sh"
    agent.write_text(f'#!/bin/sh\nprintf "%s\\n" "$PI_OFFLINE" >> {seen}\n')
    agent.chmod(0o755)
    assert reefine.wrapper("pi", REEF_HARNESS_BINARY=str(agent), PI_OFFLINE="").returncode == 0
    assert reefine.wrapper("pi", REEF_HARNESS_BINARY=str(agent), PI_OFFLINE="0").returncode == 0
    assert seen.read_text().splitlines() == ["1", "0"]


def test_reef_dsh_with_a_task_runs_it_on_the_headless_profile(reefine: Reefine) -> None:
    assert reefine.install("dsh").returncode == 0
    seen = reefine.home / "dsh-args.txt"
    agent = reefine.home / "dsh.sh"
    agent.write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s|" "$a"; done >> {seen}\necho >> {seen}\n')
    agent.chmod(0o755)
    assert reefine.wrapper("dsh", "fix the failing test", REEF_HARNESS_BINARY=str(agent)).returncode == 0
    assert reefine.wrapper("dsh", "tui", "--resume", "s1", REEF_HARNESS_BINARY=str(agent)).returncode == 0
    patch = str(reefine.root("dsh") / "dsh" / "reef-binding.patch.yml")
    task, profile = (line.split("|")[:-1] for line in seen.read_text().splitlines())
    assert task == ["--profile", "headless", "--patch", patch, "fix the failing test"]
    assert profile == ["--profile", "tui", "--patch", patch, "--resume", "s1"]
