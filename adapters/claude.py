"""Claude Code: everything lives under `claude/`, which `CLAUDE_CONFIG_DIR` points at (the person's `~/.claude` and
`~/.claude.json` are never read or written).

Rules become `CLAUDE.md`, skills `skills/<name>/SKILL.md`, commands `commands/<name>.md` (typed as /<name>) and the
config `settings.json`. Claude Code runs no extensions and its hooks run shell commands outside review, so both are
refused. The model binding is the `env` block of `settings.json` (which beats the shell's environment): reef's URL,
the model for every alias, and an empty `ANTHROPIC_API_KEY` so the person's own key is never sent. The session's
token (`ANTHROPIC_AUTH_TOKEN`) and headers (`ANTHROPIC_CUSTOM_HEADERS`) come from the wrapper; on a daemon that
forwards clients' own logins (inference.client-auth pass), a person's Claude plan login is handed to Claude Code as
`CLAUDE_CODE_OAUTH_TOKEN` and reef's token goes in its own header instead. Nonessential traffic,
telemetry, error reporting, auto-update and the plugin marketplace are off in the same block.
"""

from __future__ import annotations

import getpass
import json
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from adapters._agent import BINDING_IS_REEFS, AgentSide, Binding, Login, reef_headers
from adapters._base import Adapter, RenderRefused, json_file, prompt_files, sorted_files, start_files, tree_config
from adapters._reef_commands import shell_commands
from reef_contract import SESSION_HEADER, TOKEN_HEADER
from reef_harness import Entry

SETTINGS = "claude/settings.json"
RENDERS = {
    "rules": "claude/CLAUDE.md",
    "skill": "claude/skills/<name>/SKILL.md",
    "command": "claude/commands/<name>.md (typed as /<name>)",
    "config": SETTINGS,
}
# What keeps a session talking to reef alone: no update checks, telemetry, error reports, feedback or marketplace.
QUIET_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
}
# The settings every tree starts from: quiet, and no desktop URL handler written into the person's home.
DEFAULTS: dict[str, Any] = {"env": QUIET_ENV, "disableDeepLinkRegistration": "disable"}
_RUNS_COMMANDS = "it runs shell commands outside a session's permission checks; use a skill or a command instead"
REFUSED_SETTINGS = {
    "env": "reef sets the environment: it carries the model binding and keeps nonessential traffic off",
    "apiKeyHelper": BINDING_IS_REEFS,
    "model": BINDING_IS_REEFS,
    "forceLoginMethod": BINDING_IS_REEFS,
    "disableDeepLinkRegistration": "reef keeps this setting at its safe default",
    "hooks": _RUNS_COMMANDS,
    "statusLine": _RUNS_COMMANDS,
    "awsAuthRefresh": _RUNS_COMMANDS,
    "awsCredentialExport": _RUNS_COMMANDS,
    "otelHeadersHelper": _RUNS_COMMANDS,
    "skipDangerousModePermissionPrompt": "the person approves what leaves the session's permission checks",
}
EXTENSIONS_REFUSED = (
    "Claude Code runs no extensions (and reef refuses its hooks); use a skill for what the model should know or do, "
    "or a command for a prompt the person types as /<name>"
)


def render(entries: list[Entry]) -> dict[str, str]:
    """Claude Code's config folder for a tree."""
    files = {
        **start_files("claude", entries, RENDERS, EXTENSIONS_REFUSED),
        **prompt_files(entries, "claude/skills/{name}/SKILL.md", "claude/commands/{name}.md"),
    }
    settings = tree_config(entries, REFUSED_SETTINGS, SETTINGS, DEFAULTS)
    permissions = settings.get("permissions")
    if isinstance(permissions, dict) and permissions.get("defaultMode") == "bypassPermissions":
        raise RenderRefused(
            f"a config entry may not set permissions.defaultMode to bypassPermissions in {SETTINGS}: the person "
            f"approves what leaves the session's permission checks"
        )
    files[SETTINGS] = json_file(settings)
    return sorted_files(files)


STATE = "claude/.claude.json"
# Where Claude Code loads instructions, prompts, agents and settings from in its config folder.
LOADED = (
    "claude/CLAUDE.md",
    "claude/rules",
    "claude/skills",
    "claude/commands",
    "claude/agents",
    "claude/output-styles",
    "claude/plugins",
    SETTINGS,
    "claude/settings.local.json",
)
# What `/model` and the feedback survey write into settings.json; the binding's environment wins over `model`.
PREFERENCE_KEYS = frozenset({"model", "feedbackSurveyState"})
MODEL_ALIASES = (
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
)


def bind(files: dict[str, str], binding: Binding) -> dict[str, str]:
    """reef's URL and the model for every alias in the settings' `env`, which the shell cannot override; an empty
    API key so a key in the person's shell is never sent."""
    settings = json.loads(files.get(SETTINGS, "{}"))
    settings["env"] = {
        **settings.get("env", {}),
        "ANTHROPIC_BASE_URL": binding.url,
        "ANTHROPIC_API_KEY": "",
        **dict.fromkeys(MODEL_ALIASES, binding.model),
    }
    return sorted_files(files, {SETTINGS: json_file(settings)})


def _env(root: Path, binding: Binding) -> dict[str, str]:
    return {"CLAUDE_CONFIG_DIR": str(root / "claude")}


OAUTH_ENV = "CLAUDE_CODE_OAUTH_TOKEN"
CREDENTIALS = ".credentials.json"


def plan_login(environ: Mapping[str, str]) -> Login | None:
    """The person's Claude plan login: CLAUDE_CODE_OAUTH_TOKEN (what `claude setup-token` prints), else the access
    token of an interactive login, which Claude Code keeps in `.credentials.json` of its config folder (the person's
    CLAUDE_CONFIG_DIR, else ~/.claude) or, on macOS, in the login keychain (the item `Claude Code-credentials`, the
    same JSON). Read, never written: a session gets it as CLAUDE_CODE_OAUTH_TOKEN, since reef points
    CLAUDE_CONFIG_DIR at its own folder."""
    token = environ.get(OAUTH_ENV, "").strip()
    if token:
        return Login(f"your Claude plan login ({OAUTH_ENV})", {OAUTH_ENV: token})
    folder = environ.get("CLAUDE_CONFIG_DIR") or str(Path(environ.get("HOME") or Path.home()) / ".claude")
    path = Path(folder) / CREDENTIALS
    stored, where = _read_text(path), str(path)
    if stored is None and "CLAUDE_CONFIG_DIR" not in environ and reads_keychain():
        stored, where = _keychain_item(environ), f"the macOS keychain item {KEYCHAIN_SERVICE!r}"
    try:
        oauth = json.loads(stored or "")["claudeAiOauth"]
        token = oauth["accessToken"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(token, str) or not token:
        return None
    what = f"your Claude plan login ({where})"
    expires = oauth.get("expiresAt")
    if isinstance(expires, int | float) and expires / 1000 <= time.time():
        return Login(
            what,
            refused=f"its access token has expired: run claude once outside reef to refresh it, or set {OAUTH_ENV} "
            "to what `claude setup-token` prints",
        )
    return Login(what, {OAUTH_ENV: token})


KEYCHAIN_SERVICE = "Claude Code-credentials"  # where Claude Code keeps an interactive login on macOS
KEYCHAIN_WAIT_S = 10.0  # macOS may ask the person to allow the read first


def reads_keychain() -> bool:
    return sys.platform == "darwin"


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def _keychain_item(environ: Mapping[str, str]) -> str | None:
    """The password of the keychain item Claude Code writes, read with macOS's `security` (None when there is none,
    the person refused the read, or it did not answer in time)."""
    account = environ.get("USER") or getpass.getuser()
    argv = ["security", "find-generic-password", "-s", KEYCHAIN_SERVICE, "-a", account, "-w"]
    try:
        found = subprocess.run(argv, capture_output=True, text=True, timeout=KEYCHAIN_WAIT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return found.stdout if found.returncode == 0 else None


def _session_env(binding: Binding, session: str, token: str, login: Login | None = None) -> dict[str, str]:
    """The token and headers, and again reef's URL and the off switches: Claude Code ignores a settings file it
    finds invalid, and the token must still reach reef alone. With the person's `login`, reef's token goes in its
    own header and Claude Code sends the login (no bearer of reef's shadows it)."""
    headers = {**reef_headers(binding), SESSION_HEADER: session}
    auth = {"ANTHROPIC_AUTH_TOKEN": token}
    if login is not None:
        headers[TOKEN_HEADER] = token
        auth = {"ANTHROPIC_AUTH_TOKEN": "", **login.env}
    return {
        **auth,
        "ANTHROPIC_CUSTOM_HEADERS": "\n".join(f"{name}: {value}" for name, value in headers.items()),
        "ANTHROPIC_BASE_URL": binding.url,
        **QUIET_ENV,
    }


# In a trial, a settings file Claude Code ignores must fail: the URL outside it leads nowhere and nothing retries.
TRIAL_ENV = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "CLAUDE_CODE_MAX_RETRIES": "0"}


def _args(root: Path, args: list[str]) -> list[str]:
    """The arguments as given. First, on a fresh install, Claude Code's state file is seeded as past onboarding,
    whose connectivity check would reach Anthropic (Claude Code rewrites this file itself; it is not checked)."""
    state = root / STATE
    if not state.exists():
        state.write_text(json.dumps({"hasCompletedOnboarding": True}) + "\n", encoding="utf-8")
    return list(args)


def traffic(root: Path) -> tuple[bool, str]:
    """Whether the installed settings keep nonessential traffic, telemetry and auto-update off."""
    try:
        env = json.loads((root / SETTINGS).read_text(encoding="utf-8")).get("env", {})
    except (OSError, ValueError, AttributeError):
        env = {}
    missing = [name for name, value in QUIET_ENV.items() if env.get(name) != value]
    if missing:
        return False, f"{SETTINGS} no longer turns off: {', '.join(missing)}"
    return True, f"nonessential traffic, telemetry and auto-update are off ({SETTINGS})"


ADAPTER = Adapter(
    name="claude",
    title="Claude Code",
    binary="claude",
    renders=RENDERS,
    render=render,
    agent=AgentSide(
        package="npm install -g @anthropic-ai/claude-code",
        bind=bind,
        env=_env,
        args=_args,
        reef_entries=shell_commands("claude", {"allowed-tools": "Bash({wrapper}:*)", "disable-model-invocation": True}),
        headless=lambda prompt: ["-p", prompt],
        state_keys={SETTINGS: PREFERENCE_KEYS},
        loaded=LOADED,
        session_env=_session_env,
        offline_env=TRIAL_ENV,
        traffic=traffic,
        login=plan_login,
    ),
    notes=(
        "commands are typed as /<name>",
        "extensions and hooks are refused: Claude Code runs no extensions and hooks run outside its permission checks",
    ),
)
