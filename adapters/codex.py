"""codex (OpenAI Codex CLI): everything lives under `codex/`, which `CODEX_HOME` points at.

Codex loads no custom prompts, so a command becomes a skill the person types as `$name`. Codex hooks run outside
its command sandbox, so extensions are refused. The model binding is a `reef` provider in `config.toml` speaking
the Responses API (the only one codex speaks); /reefine and /versions are the skills `$reefine` and `$versions`.
A person's ChatGPT login is not carried (CHATGPT_REFUSED says why); codex runs on reef's upstream key.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomli_w

from adapters._agent import BINDING_IS_REEFS, SESSION_ENV, AgentSide, Binding, Login, reef_headers
from adapters._base import Adapter, RenderRefused, first_line, sorted_files, start_files, tree_config, with_frontmatter
from adapters._reef_commands import reef_commands
from reef_contract import SESSION_HEADER, TOKEN_ENV
from reef_harness import Entry

RENDERS = {
    "rules": "codex/AGENTS.md",
    "skill": "codex/skills/<name>/SKILL.md",
    "command": "codex/skills/<name>/SKILL.md (typed as $<name>)",
    "config": "codex/config.toml",
}
# Safe defaults every codex tree starts from: no update checks, no analytics, no network from sandboxed commands.
DEFAULTS: dict[str, Any] = {
    "web_search": "disabled",
    "check_for_update_on_startup": False,
    "analytics": {"enabled": False},
    "feedback": {"enabled": False},
    "sandbox_workspace_write": {"network_access": False},
}
_SAFETY = "reef keeps this setting at its safe default"
REFUSED_SETTINGS = {
    "model": BINDING_IS_REEFS,
    "model_provider": BINDING_IS_REEFS,
    "model_providers": BINDING_IS_REEFS,
    "model_catalog_json": BINDING_IS_REEFS,
    "approval_policy": "the person approves commands that leave the sandbox",
    "sandbox_workspace_write": _SAFETY,
    "check_for_update_on_startup": _SAFETY,
    "analytics": _SAFETY,
    "feedback": _SAFETY,
    "features": _SAFETY,
    "otel": _SAFETY,
}


def render(entries: list[Entry]) -> dict[str, str]:
    """The codex home directory for a tree."""
    files = start_files("codex", entries, RENDERS)
    for entry in entries:
        if entry.kind not in ("skill", "command"):
            continue
        path = f"codex/skills/{entry.name}/SKILL.md"
        if path in files:
            raise RenderRefused(
                f"entry '{entry.id}' is named '{entry.name}' like another skill or command; codex shows both as "
                f"skills, so give one a different name"
            )
        text = str(entry.config["text"])
        description = first_line(text)
        if entry.kind == "command":
            description = f"Type ${entry.name} to run it. {description}".strip()
        files[path] = with_frontmatter(text, {"name": entry.name, "description": description})
    config = tree_config(entries, REFUSED_SETTINGS, RENDERS["config"], DEFAULTS)
    try:
        files[RENDERS["config"]] = tomli_w.dumps(config)
    except TypeError as exc:
        raise RenderRefused(f"a config entry holds a value TOML cannot write (null?): {exc}") from None
    return sorted_files(files)


CONFIG = "codex/config.toml"
# Where codex loads instructions, rules, hooks and settings from in its home; it keeps its bundled skills in
# skills/.system itself.
LOADED = (
    "codex/AGENTS.md",
    "codex/AGENTS.override.md",
    "codex/config.toml",
    "codex/managed_config.toml",
    "codex/requirements.toml",
    "codex/hooks.json",
    "codex/skills",
    "codex/prompts",
    "codex/rules",
)
OWN_FILES = ("codex/skills/.system/*",)


def bind(files: dict[str, str], binding: Binding) -> dict[str, str]:
    """Point codex at reef: a `reef` provider (token from a variable, scenario and tags as headers) and the model."""
    config = tomllib.loads(files.get(CONFIG, ""))
    config["model"] = binding.model
    config["model_provider"] = "reef"
    config["model_providers"] = {
        "reef": {
            "name": "reef",
            "base_url": f"{binding.url}/v1",
            "env_key": TOKEN_ENV,
            "wire_api": "responses",
            "supports_websockets": False,
            "http_headers": reef_headers(binding),
            "env_http_headers": {SESSION_HEADER: SESSION_ENV},
        }
    }
    return sorted_files(files, {CONFIG: tomli_w.dumps(config)})


def _env(root: Path, binding: Binding) -> dict[str, str]:
    return {"CODEX_HOME": str(root / "codex")}


# Why reef-codex runs on reef's upstream key, not a ChatGPT login. The install script says the same words.
CHATGPT_REFUSED = (
    "codex takes a ChatGPT login only from auth.json (or the keyring) under CODEX_HOME, which reef-codex points at "
    "the harness install, and reef copies no login (refresh token included) into its install"
)


def chatgpt_login(environ: Mapping[str, str]) -> Login | None:
    """The person's ChatGPT login in their codex home (CODEX_HOME, else ~/.codex), which reef-codex cannot carry."""
    home = environ.get("CODEX_HOME") or str(Path(environ.get("HOME") or Path.home()) / ".codex")
    path = Path(home) / "auth.json"
    try:
        tokens = json.loads(path.read_text(encoding="utf-8")).get("tokens")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(tokens, dict) or not tokens.get("access_token"):
        return None
    return Login(f"your ChatGPT login ({path})", refused=CHATGPT_REFUSED)


ADAPTER = Adapter(
    name="codex",
    title="OpenAI Codex CLI",
    binary="codex",
    renders=RENDERS,
    render=render,
    agent=AgentSide(
        package="npm install -g @openai/codex",
        bind=bind,
        env=_env,
        reef_entries=reef_commands("codex", "$"),
        headless=lambda prompt: ["exec", "--skip-git-repo-check", prompt],
        loaded=LOADED,
        own_files=OWN_FILES,
        login=chatgpt_login,
    ),
    notes=("commands become skills typed as $<name>", "extensions are refused: codex hooks run outside its sandbox"),
)
