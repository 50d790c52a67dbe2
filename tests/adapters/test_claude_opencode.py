"""The real `claude` and `opencode` through their wrappers against reef (fake upstream, auth on): a headless prompt
is recorded under the scenario with the session tag, the token reaches reef and nothing else does, no request
leaves for another host, and the person's own config is neither read nor changed; /reefine and /versions run as
the agents' own command files."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.adapters_testing import SCENARIO, Reefine, start_reefine, stop_reefine
from tests.support.agent_upstream import AgentUpstream
from tests.support.fake_proposer_model import answer, skill
from tests.support.fixtures import FindAgent
from tests.support.proxy_watch import ProxyWatch

TOKEN = "reef-adapter-token-0123456789"
PERSON_KEY = "person-own-anthropic-key-0123456789"
# adapter -> (headless arguments for a prompt, for a command with its text, where a published skill lands)
AGENTS = {
    "claude": (["-p"], lambda name, text: ["-p", f"/{name} {text}"], "claude/skills/{name}/SKILL.md"),
    "opencode": (
        ["run"],
        lambda name, text: ["run", "--command", name, *text.split()],
        "opencode/config/opencode/skill/{name}/SKILL.md",
    ),
}
# Where each agent's own /reefine and /versions command files are installed.
RENDERED = {"claude": "claude/commands/{name}.md", "opencode": "opencode/config/opencode/command/{name}.md"}
# The person's own config for each agent, which would send a header of theirs if it were read.
PERSON_FILES = {
    ".claude/settings.json": {"env": {"ANTHROPIC_CUSTOM_HEADERS": "x-person: mine"}},
    ".claude.json": {"hasCompletedOnboarding": True},
    ".config/opencode/opencode.json": {"provider": {"reef": {"options": {"headers": {"x-person": "mine"}}}}},
}


@pytest.fixture
def reef_with_token(tmp_path: Path, upstream: AgentUpstream, home: Path) -> Iterator[Reefine]:
    started = start_reefine(tmp_path, upstream, home, token=TOKEN)
    yield started
    stop_reefine(tmp_path, started)


def person_config(home: Path) -> dict[str, bytes]:
    files = {}
    for relative, content in PERSON_FILES.items():
        path = home / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content) + "\n")
        files[relative] = path.read_bytes()
    return files


def outside_reef(home: Path) -> set[str]:
    """Every path under the home but reef's install, its wrapper link and the project the session ran in."""
    kept = ("reef-harness", ".local/bin", "project")
    found = {path.relative_to(home).as_posix() for path in home.rglob("*")}
    return {path for path in found if path != ".local" and not path.startswith(kept)}


@pytest.mark.parametrize("adapter", list(AGENTS))
def test_a_headless_prompt_reaches_reef_alone_and_leaves_the_persons_config_alone(
    reef_with_token: Reefine, adapter: str, agent_cli: FindAgent
) -> None:
    reefine = reef_with_token
    agent_cli(adapter)
    mine = person_config(reefine.home)
    before = outside_reef(reefine.home)
    assert reefine.install(adapter, REEF_TOKEN=TOKEN).returncode == 0

    prompt, _command, _skill = AGENTS[adapter]
    with ProxyWatch() as watch:
        ran = reefine.wrapper(
            adapter, *prompt, "What is the capital of France?", ANTHROPIC_API_KEY=PERSON_KEY, **watch.env()
        )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "Paris" in ran.stdout and "model call(s) of this session are recorded" in ran.stderr
    assert watch.attempts == []  # nothing tried to reach any other host

    rows = reefine.call("GET", "/reef/records", scenario=SCENARIO, type="inference")["records"]
    sidecar = json.loads((reefine.root(adapter) / ".reef-harness-release").read_text())
    tags = [reefine.call("GET", f"/reef/records/{row['id']}")["tags"] for row in rows]
    assert rows and all(len(tag["session"]) == 32 and tag["release"] == sidecar["release_id"] for tag in tags)
    # The token reached reef (which refuses calls without it) and went no further; nor did the person's key or
    # anything from their own config.
    sent = json.dumps([received.headers for received in reefine.upstream.agents.received])
    assert TOKEN not in sent and PERSON_KEY not in sent and "x-person" not in sent.lower()

    doctor = reefine.wrapper(adapter, "doctor")
    assert doctor.returncode == 0, doctor.stdout
    assert "ok the token is accepted" in doctor.stdout and "are off (" in doctor.stdout

    # Removing reef's install leaves the person's own config as it was, and nothing else in their home changed.
    shutil.rmtree(reefine.root(adapter))
    (reefine.home / ".local" / "bin" / f"reef-{adapter}").unlink()
    assert {relative: (reefine.home / relative).read_bytes() for relative in mine} == mine
    assert outside_reef(reefine.home) == before


@pytest.mark.parametrize("adapter", list(AGENTS))
def test_reefine_and_versions_run_as_the_agents_own_commands(
    reefine: Reefine, adapter: str, agent_cli: FindAgent
) -> None:
    agent_cli(adapter)
    assert reefine.install(adapter).returncode == 0
    _prompt, command, skill_path = AGENTS[adapter]
    for name in ("reefine", "versions"):
        assert (reefine.root(adapter) / RENDERED[adapter].format(name=name)).is_file()
    reefine.upstream.proposer.script(
        "answer", answer("A haiku skill.\n\nHow to use: ask for a haiku.", skill("haiku", "# Haiku\nIn 5-7-5."))
    )
    filed = reefine.wrapper(adapter, *command("reefine", "answer every question with a haiku"))
    assert filed.returncode == 0, filed.stdout + filed.stderr
    train = reefine.call("GET", "/reef/records", scenario=SCENARIO, type="train")["records"][0]
    assert reefine.call("GET", f"/reef/records/{train['id']}")["text"] == "answer every question with a haiku"
    # What the wrapper printed reached the session's model, which was asked to show it.
    assert "How to use: ask for a haiku." in last_prompt(reefine)

    assert reefine.wrapper(adapter, *command("versions", "")).returncode == 0
    listed = last_prompt(reefine)
    # The versions table (version, release, operation, result, status) with v1, published for the request.
    assert re.search(r"v1\b.*\btraining\b.*\bselected\b", listed), listed[-2000:]
    assert "answer every question with a haiku" in listed

    installed = reefine.wrapper(adapter, *command("versions", "v1 install"))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "installed " + adapter + " harness v1" in last_prompt(reefine)
    assert "In 5-7-5." in (reefine.root(adapter) / skill_path.format(name="haiku")).read_text()
    assert reefine.wrapper(adapter, REEF_HARNESS_BINARY="/bin/true").returncode == 0  # the update checks out


def last_prompt(reefine: Reefine) -> str:
    """The text of the newest request the agents' fake model received."""
    return reefine.upstream.agents.received[-1].body.decode()
