"""`reef-claude -p` on the embedded model answers: Claude Code asks for 32,000 tokens with its whole system prompt,
and the 135M model would repeat itself until its context is full; reef's bounds end the answer, as finished, well
within the agent's time."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.adapters_testing import AGENT_BIN
from tests.support.cli_testing import clean_env, run_reef
from tests.support.fixtures import FindAgent

SCENARIO = "my-harness"
AGENT_TIME_S = 600  # Claude Code's own wait for one model answer (API_TIMEOUT_MS)


@pytest.fixture
def embedded_reefine(embedded_models: Path, tmp_path: Path) -> Iterator[str]:
    """`reef start --recipe reefine` on the embedded model, as README's harness section runs it without an
    upstream; its URL."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "models").symlink_to(embedded_models, target_is_directory=True)
    started = run_reef(
        tmp_path, clean_env(), "start", "--recipe", "reefine", "--reef.port", "0", "--reef.state-dir", str(state),
        "--harness.trial", "off", "--harness.proposer-agent", "off", timeout=300,
    )  # fmt: skip
    assert started.returncode == 0, started.stdout + started.stderr
    yield (state / "daemon.url").read_text().strip()
    stopped = run_reef(tmp_path, clean_env(), "stop", "--state-dir", str(state))
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr


def test_reef_claude_answers_on_the_embedded_model(embedded_reefine: str, home: Path, agent_cli: FindAgent) -> None:
    agent_cli("claude")
    url = embedded_reefine
    assert httpx.post(f"{url}/reef/scenarios", json={"name": SCENARIO}, timeout=30).status_code == 201
    script = httpx.get(
        f"{url}/reef/harness/install", params={"adapter": "claude"}, headers={"x-reef-scenario": SCENARIO}, timeout=30
    )
    assert script.status_code == 200, script.text
    path = ":".join([str(home / ".local" / "bin"), *map(str, AGENT_BIN), "/usr/local/bin", "/usr/bin", "/bin"])
    env = clean_env(HOME=str(home), PATH=path, REEF_PYTHON=sys.executable)
    env.pop("TMPDIR", None)
    installed = subprocess.run(
        ["sh", "-s"], input=script.text, cwd=home, env=env, capture_output=True, text=True, timeout=120
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    project = home / "project"
    project.mkdir()

    done = subprocess.run(
        [str(home / ".local" / "bin" / "reef-claude"), "-p", "Say hi"],
        cwd=project, env=env, capture_output=True, text=True, timeout=AGENT_TIME_S, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip()
    rows = httpx.get(f"{url}/reef/records", params={"scenario": SCENARIO}, timeout=30).json()["records"]
    answered = [httpx.get(f"{url}/reef/records/{row['id']}", timeout=30).json() for row in rows]
    tokens = [record["tokens"] for record in answered if record.get("tokens")]
    assert tokens, answered
    for answer in tokens:  # whatever Claude Code asked for, each answer was held to the cap
        assert len(answer["output_ids"]) <= 1024
    assert any(answer["sampling"].get("asked_max_tokens", 0) > 1024 for answer in tokens)
