"""What adapter tests share: a reefine daemon (`reef start`) in front of the agent/proposer fake, and a home.

The home lies outside /tmp (codex and dsh installs refuse roots their sandboxes can write) and outside any git
work tree. Agent CLIs come from `.tools/node_modules/.bin` (npm) and the virtual environment (dsh).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from tests.support.agent_upstream import AgentUpstream
from tests.support.cli_testing import clean_env, run_reef
from tests.support.waiting import eventually_sync

REPO = Path(__file__).resolve().parents[2]
AGENT_BIN = [REPO / ".tools" / "node_modules" / ".bin", Path(sys.executable).parent]
SCENARIO = "my-harness"
MODEL = "fake-model"


@dataclass
class Reefine:
    """A running reefine daemon, its fake model, and a person's machine (HOME, PATH) to install on."""

    url: str
    state_dir: Path
    upstream: AgentUpstream
    home: Path
    token: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    def at_home(self, home: Path) -> Reefine:
        """The same daemon, for a person whose home is `home`."""
        return replace(self, home=home, env=person_env(home))

    def headers(self, scenario: str = SCENARIO) -> dict[str, str]:
        headers = {"x-reef-scenario": scenario}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def call(self, method: str, path: str, body: Any = None, **params: str) -> Any:
        response = httpx.request(method, self.url + path, json=body, params=params, headers=self.headers(), timeout=30)
        assert response.status_code < 300, response.text
        return response.json()

    def script(self, adapter: str, release_id: str | None = None, headers: dict[str, str] | None = None) -> str:
        params = {"adapter": adapter, **({"release_id": release_id} if release_id else {})}
        response = httpx.get(
            self.url + "/reef/harness/install", params=params, headers=headers or self.headers(), timeout=30
        )
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/x-shellscript")
        return response.text

    def install(
        self, adapter: str, *args: str, script: str | None = None, cwd: Path | None = None, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """Run the install script with `sh -s -- ARGS`, as `curl ... | sh -s -- ARGS` would."""
        return subprocess.run(
            ["sh", "-s", "--", *args],
            input=script if script is not None else self.script(adapter),
            cwd=cwd or self.home,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )

    def root(self, adapter: str = "pi", scenario: str = SCENARIO) -> Path:
        """Where the install script puts an adapter's harness by default: a root per scenario and adapter."""
        return self.home / "reef-harness" / scenario / adapter

    def wrapper(self, adapter: str, *args: str, timeout: float = 240, **env: str) -> subprocess.CompletedProcess[str]:
        """Run the installed `reef-<adapter>` through its link in ~/.local/bin, from a project directory."""
        project = self.home / "project"
        project.mkdir(exist_ok=True)
        return subprocess.run(
            [str(self.home / ".local" / "bin" / f"reef-{adapter}"), *args],
            cwd=project,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def publish_skill(self, name: str, text: str) -> dict[str, Any]:
        """File a change request the scripted proposer answers with one skill; wait until it settles."""
        from tests.support.fake_proposer_model import answer, skill

        self.upstream.proposer.script("answer", answer(f"A skill.\n\nHow to use: ask for {name}.", skill(name, text)))
        filed = self.call("POST", "/reef/train", {"text": f"add a {name} skill"})
        progress: dict[str, Any] = eventually_sync(
            lambda: self.call("GET", f"/reef/requests/{filed['agent_record_id']}"),
            60,
            f"the request to add a {name} skill to settle",
            satisfied=lambda request: request["state"] == "settled",
        )
        assert progress["result"] == "selected", progress
        return progress


def start_reefine(
    tmp_path: Path, upstream: AgentUpstream, home: Path, token: str | None = None, model: str = MODEL, *extra: str
) -> Reefine:
    """`reef start --recipe reefine` on a free port, state in `tmp_path/state` (a restart keeps it); `extra`
    settings for the daemon."""
    state = tmp_path / "state"
    daemon_env = clean_env(**({"REEF_TOKEN": token} if token else {}))
    started = run_reef(
        tmp_path, daemon_env, "start", "--recipe", "reefine", "--inference.upstream-url", upstream.url,
        "--inference.upstream-model", model, "--reef.port", "0", "--reef.state-dir", str(state),
        "--harness.trial", "off",  # trials have their own tests; these are about the person's machine
        "--harness.proposer-agent", "off",  # the scripted text proposer, though set-up installed pi
        *extra,
    )  # fmt: skip
    assert started.returncode == 0, started.stdout + started.stderr
    url = (state / "daemon.url").read_text().strip()
    reefine = Reefine(url, state, upstream, home, token, person_env(home))
    reefine.call("POST", "/reef/scenarios", {"name": SCENARIO})
    return reefine


def installed_files(root: Path) -> dict[str, str]:
    """The files an install wrote under `root`, by path, as its sidecar lists them."""
    sidecar = json.loads((root / ".reef-harness-release").read_text())
    return {path: (root / path).read_text() for path in sidecar["files"]}


def person_env(home: Path) -> dict[str, str]:
    """The environment of a person whose home is `home`: the wrappers the install links and the agents on PATH."""
    path = ":".join([str(home / ".local" / "bin"), *map(str, AGENT_BIN), "/usr/local/bin", "/usr/bin", "/bin"])
    env = clean_env(HOME=str(home), PATH=path, REEF_PYTHON=sys.executable, PI_OFFLINE="1")
    env.pop("TMPDIR", None)
    return env


def stop_reefine(tmp_path: Path, reefine: Reefine) -> None:
    stopped = run_reef(tmp_path, clean_env(), "stop", "--state-dir", str(reefine.state_dir))
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr


def agent_binary(name: str) -> Path | None:
    """Where the tests find an agent CLI (set-up installs them), or None when it is not installed here."""
    for folder in AGENT_BIN:
        if (folder / name).exists():
            return folder / name
    return None
