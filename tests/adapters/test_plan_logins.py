"""The real `claude` through reef-claude on the person's own Claude plan login: a provider that answers only that
OAuth bearer answers a headless prompt, the exchange is recorded, reef's token reaches reef alone, and the login's
bytes are nowhere in reef's state, logs or install, nor was ~/.claude changed."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters import claude
from adapters.codex import CHATGPT_REFUSED
from tests.support.adapters_testing import SCENARIO, Reefine, start_reefine, stop_reefine
from tests.support.agent_upstream import AgentUpstream
from tests.support.fixtures import FindAgent
from tests.support.proxy_watch import ProxyWatch

TOKEN = "reef-adapter-token-0123456789"
OAUTH = "sk-ant-oat01-person-plan-login-5a7e9c"
QUESTION = "What is the capital of France?"


@pytest.fixture
def passing(tmp_path: Path, upstream: AgentUpstream, home: Path) -> Iterator[Reefine]:
    upstream.agents.bearer = OAUTH
    started = start_reefine(tmp_path, upstream, home, TOKEN, "fake-model", "--inference.client-auth", "pass")
    yield started
    stop_reefine(tmp_path, started)


def _nowhere_under(folder: Path, secret: str) -> None:
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert secret.encode() not in path.read_bytes(), path


def _asks_once(reefine: Reefine, **env: str) -> None:
    with ProxyWatch() as watch:
        ran = reefine.wrapper("claude", "-p", QUESTION, timeout=240, **{**env, **watch.env()})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "Paris" in ran.stdout and "model call(s) of this session are recorded" in ran.stderr
    assert watch.attempts == []
    rows = reefine.call("GET", "/reef/records", scenario=SCENARIO, type="inference")["records"]
    assert rows and QUESTION in json.dumps(reefine.call("GET", f"/reef/records/{rows[0]['id']}"))
    sent = reefine.upstream.agents.received[-1].headers
    assert sent["Authorization"] == f"Bearer {OAUTH}" and "oauth-2025-04-20" in sent["anthropic-beta"]
    every = json.dumps([received.headers for received in reefine.upstream.agents.received])
    assert TOKEN not in every and "x-reef-token" not in every.lower()


def test_reef_claude_runs_on_the_persons_oauth_token(passing: Reefine, agent_cli: FindAgent) -> None:
    agent_cli("claude")
    assert passing.install("claude", REEF_TOKEN=TOKEN).returncode == 0
    _asks_once(passing, CLAUDE_CODE_OAUTH_TOKEN=OAUTH)

    doctor = passing.wrapper("claude", "doctor", CLAUDE_CODE_OAUTH_TOKEN=OAUTH)
    assert "ok login: your Claude plan login (CLAUDE_CODE_OAUTH_TOKEN), forwarded upstream" in doctor.stdout
    for folder in (passing.state_dir, passing.home / "reef-harness", passing.home / ".local"):
        _nowhere_under(folder, OAUTH)


def test_reef_claude_runs_on_the_login_claude_code_keeps(passing: Reefine, agent_cli: FindAgent) -> None:
    agent_cli("claude")
    credentials = passing.home / ".claude" / ".credentials.json"
    credentials.parent.mkdir()
    login = {"accessToken": OAUTH, "refreshToken": "sk-ant-ort01-x", "expiresAt": int((time.time() + 3600) * 1000)}
    credentials.write_text(json.dumps({"claudeAiOauth": login}))
    kept = credentials.read_bytes()
    assert passing.install("claude", REEF_TOKEN=TOKEN).returncode == 0
    _asks_once(passing)
    assert credentials.read_bytes() == kept and sorted(credentials.parent.iterdir()) == [credentials]
    for folder in (passing.state_dir, passing.home / "reef-harness"):
        _nowhere_under(folder, OAUTH)


def test_a_daemon_that_keeps_reefs_auth_is_named_by_doctor(reefine: Reefine, agent_cli: FindAgent) -> None:
    agent_cli("claude")
    assert reefine.install("claude").returncode == 0
    doctor = reefine.wrapper("claude", "doctor", CLAUDE_CODE_OAUTH_TOKEN=OAUTH)
    assert "is not forwarded (the daemon's inference.client-auth is reef)" in doctor.stdout
    assert "--inference.client-auth pass" in doctor.stdout


def test_reef_codex_says_at_install_and_in_doctor_why_a_chatgpt_login_is_not_used(reefine: Reefine) -> None:
    auth = reefine.home / ".codex" / "auth.json"
    auth.parent.mkdir()
    auth.write_text(json.dumps({"auth_mode": "chatgpt", "tokens": {"access_token": "eyJ-chatgpt", "account_id": "a"}}))
    installed = reefine.install("codex")
    assert installed.returncode == 0, installed.stderr
    assert CHATGPT_REFUSED in installed.stderr.replace("\n", " ")
    doctor = reefine.wrapper("codex", "doctor", REEF_HARNESS_BINARY="/bin/true")
    assert f"login: your ChatGPT login ({auth}) is not used, {CHATGPT_REFUSED}" in doctor.stdout
    assert "eyJ-chatgpt" not in doctor.stdout + installed.stdout + installed.stderr


def test_an_expired_login_claude_code_keeps_is_named_and_not_sent(passing: Reefine) -> None:
    credentials = passing.home / ".claude" / ".credentials.json"
    credentials.parent.mkdir()
    login = {"accessToken": OAUTH, "expiresAt": int((time.time() - 60) * 1000)}
    credentials.write_text(json.dumps({"claudeAiOauth": login}))
    assert passing.install("claude", REEF_TOKEN=TOKEN).returncode == 0
    doctor = passing.wrapper("claude", "doctor", REEF_HARNESS_BINARY="/bin/true")
    assert (
        f"!! login: your Claude plan login ({credentials}) is not used, its access token has expired" in doctor.stdout
    )
    assert "claude setup-token" in doctor.stdout and OAUTH not in doctor.stdout


FAKE_SECURITY = """#!/bin/sh
# macOS's security(1) as Claude Code's login keychain answers it: the item's password for the right service and account
[ "$1 $2 $3 $4 $5 $6" = "find-generic-password -s Claude Code-credentials -a person -w" ] || exit 44
printf '%s' '{"claudeAiOauth": {"accessToken": "TOKEN", "expiresAt": EXPIRES}}'
"""


@pytest.mark.parametrize("stored", [True, False], ids=["in-the-keychain", "nowhere"])
def test_on_macos_the_login_claude_code_keeps_in_the_keychain_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stored: bool
) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    security = tools / "security"
    expires = str(int((time.time() + 3600) * 1000))
    script = FAKE_SECURITY.replace("TOKEN", OAUTH).replace("EXPIRES", expires)
    security.write_text(script if stored else "#!/bin/sh\nexit 44\n")
    security.chmod(0o755)
    monkeypatch.setattr(claude, "reads_keychain", lambda: True)
    environ = {"HOME": str(tmp_path / "home"), "USER": "person", "PATH": f"{tools}:{os.environ['PATH']}"}
    monkeypatch.setenv("PATH", environ["PATH"])

    login = claude.plan_login(environ)

    if stored:
        assert login is not None and login.env == {claude.OAUTH_ENV: OAUTH} and login.refused is None
        assert "keychain" in login.what and OAUTH not in login.what
    else:
        assert login is None
