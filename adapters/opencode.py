"""opencode: everything lives under `opencode/`. The wrapper points opencode's XDG folders there, so its global
config folder is `opencode/config/opencode` and its sessions, cache and state stay beside it; the person's
`~/.config/opencode` is never read or written, and the Claude Code files and external skills it would also load
are off.

Rules become `AGENTS.md`, skills `skill/<name>/SKILL.md`, commands `command/<name>.md` (typed as /<name>) and the
config `opencode.json`. Plugins (opencode's extensions) and MCP servers run code outside review, so both are
refused. The model binding is a `reef` provider (OpenAI chat completions) in `opencode.json` whose key and session
header name variables the wrapper sets; auto-update, sharing and the models fetch are off.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from adapters._agent import BINDING_IS_REEFS, SESSION_ENV, AgentSide, Binding, reef_headers
from adapters._base import Adapter, json_file, prompt_files, sorted_files, start_files, tree_config
from adapters._reef_commands import shell_commands
from reef_contract import SESSION_HEADER, TOKEN_ENV
from reef_harness import Entry

CONFIG_DIR = "opencode/config/opencode"
CONFIG = f"{CONFIG_DIR}/opencode.json"
RENDERS = {
    "rules": f"{CONFIG_DIR}/AGENTS.md",
    "skill": f"{CONFIG_DIR}/skill/<name>/SKILL.md",
    "command": f"{CONFIG_DIR}/command/<name>.md (typed as /<name>)",
    "config": CONFIG,
}
# opencode adds "$schema" to a config lacking it; with it, the installed file is never rewritten.
SCHEMA = "https://opencode.ai/config.json"
DEFAULTS: dict[str, Any] = {"$schema": SCHEMA, "autoupdate": False, "share": "disabled"}
# Present in the config folder, these stop opencode writing a .gitignore or fetching its plugin package from npm
# (a node_modules folder, which an install makes by writing a file into it, and a lock naming the package).
KEEP_FILES = {
    f"{CONFIG_DIR}/node_modules/.reef-keep": "reef: opencode finds its plugin package here and fetches nothing\n",
    f"{CONFIG_DIR}/.gitignore": "node_modules\npackage.json\nbun.lock\n.gitignore\n",
    f"{CONFIG_DIR}/package-lock.json": json.dumps({"packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}}})
    + "\n",
}
_SAFETY = "reef keeps this setting at its safe default"
_RUNS_CODE = "it runs code outside reef's review; use a skill or a command instead"
REFUSED_SETTINGS = {
    "provider": "only reef's own provider is configured, by the install script",
    "model": BINDING_IS_REEFS,
    "small_model": BINDING_IS_REEFS,
    "enabled_providers": BINDING_IS_REEFS,
    "disabled_providers": BINDING_IS_REEFS,
    "$schema": _SAFETY,
    "autoupdate": _SAFETY,
    "share": _SAFETY,
    "plugin": _RUNS_CODE,
    "mcp": _RUNS_CODE,
    "instructions": "rules entries are the instructions; a URL here would be fetched at every start",
}
EXTENSIONS_REFUSED = (
    "opencode's extensions are plugins, which run code in its process outside reef's review; use a skill for what "
    "the model should know or do, or a command for a prompt the person types as /<name>"
)


def render(entries: list[Entry]) -> dict[str, str]:
    """opencode's config folder for a tree."""
    files = {
        **start_files("opencode", entries, RENDERS, EXTENSIONS_REFUSED),
        **KEEP_FILES,
        **prompt_files(entries, f"{CONFIG_DIR}/skill/{{name}}/SKILL.md", f"{CONFIG_DIR}/command/{{name}}.md"),
    }
    files[CONFIG] = json_file(tree_config(entries, REFUSED_SETTINGS, CONFIG, DEFAULTS))
    return sorted_files(files)


# Where opencode loads instructions, prompts, agents, plugins, tools and settings from in its config folder.
LOADED = tuple(
    f"{CONFIG_DIR}/{name}"
    for name in (
        "AGENTS.md",
        "opencode.json",
        "opencode.jsonc",
        "config.json",
        "command",
        "commands",
        "agent",
        "agents",
        "mode",
        "modes",
        "plugin",
        "plugins",
        "skill",
        "skills",
        "tool",
        "tools",
    )
)
# Off switches in opencode's environment: no models.dev fetch, update check, sharing, or other agents' files.
QUIET_ENV = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
}


def bind(files: dict[str, str], binding: Binding) -> dict[str, str]:
    """Add the `reef` provider (token and session tag by variable name, scenario and release as headers) and make
    its model the only one."""
    provider = {
        "name": "reef",
        "npm": "@ai-sdk/openai-compatible",
        "options": {
            "baseURL": f"{binding.url}/v1",
            "apiKey": f"{{env:{TOKEN_ENV}}}",
            "headers": {**reef_headers(binding), SESSION_HEADER: f"{{env:{SESSION_ENV}}}"},
        },
        "models": {binding.model: {"name": binding.model}},
    }
    config = json.loads(files.get(CONFIG, "{}"))
    config.update(
        provider={"reef": provider},
        model=f"reef/{binding.model}",
        small_model=f"reef/{binding.model}",
        enabled_providers=["reef"],
    )
    return sorted_files(files, {CONFIG: json_file(config)})


def _env(root: Path, binding: Binding) -> dict[str, str]:
    base = root / "opencode"
    folders = {name: str(base / name.lower()) for name in ("CONFIG", "DATA", "STATE", "CACHE")}
    return {**{f"XDG_{name}_HOME": path for name, path in folders.items()}, **QUIET_ENV}


def traffic(root: Path) -> tuple[bool, str]:
    """Whether the installed config keeps auto-update and sharing off (the wrapper turns off the rest)."""
    try:
        config = json.loads((root / CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    if not isinstance(config, dict) or config.get("autoupdate") is not False or config.get("share") != "disabled":
        return False, f"{CONFIG} no longer keeps auto-update and sharing off"
    return True, f"auto-update, sharing and the models fetch are off ({CONFIG} and {', '.join(QUIET_ENV)})"


ADAPTER = Adapter(
    name="opencode",
    title="opencode",
    binary="opencode",
    renders=RENDERS,
    render=render,
    agent=AgentSide(
        package="npm install -g opencode-ai",
        bind=bind,
        env=_env,
        reef_entries=shell_commands("opencode", {}),
        headless=lambda prompt: ["run", prompt],
        loaded=LOADED,
        traffic=traffic,
    ),
    notes=(
        "commands are typed as /<name>",
        "extensions (plugins) and MCP servers are refused: they run code outside reef's review",
    ),
)
