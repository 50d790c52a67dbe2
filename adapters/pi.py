"""pi (the pi coding agent): everything lives under `pi-agent/`, which `PI_CODING_AGENT_DIR` points at.

The model binding is a `reef` provider in `models.json` plus the default model in `settings.json`; reef's own
extension (`reef-requests`) adds /reefine and /versions to every session.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

from adapters._agent import BINDING_IS_REEFS, SESSION_ENV, AgentSide, Binding, reef_headers
from adapters._base import Adapter, json_file, prompt_files, sorted_files, start_files, tree_config
from reef_contract import SESSION_HEADER, TOKEN_ENV
from reef_harness import Entry

OFFLINE_ENV = "PI_OFFLINE"  # pi's switch for its start-up network operations (tool downloads, package installs)
RENDERS = {
    "rules": "pi-agent/AGENTS.md",
    "skill": "pi-agent/skills/<name>/SKILL.md",
    "command": "pi-agent/prompts/<name>.md",
    "extension": "pi-agent/extensions/<name>.ts",
    "config": "pi-agent/settings.json",
}
# The model binding is added at install time; a tree may not choose or redirect the model.
REFUSED_SETTINGS = {
    "defaultProvider": BINDING_IS_REEFS,
    "defaultModel": BINDING_IS_REEFS,
    "enabledModels": BINDING_IS_REEFS,
    "providers": "only reef's own provider is configured, by the install script",
    "httpProxy": "model traffic must go to reef directly",
}


def render(entries: list[Entry]) -> dict[str, str]:
    """The pi-agent directory for a tree."""
    files = {
        **start_files("pi", entries, RENDERS),
        **prompt_files(entries, "pi-agent/skills/{name}/SKILL.md", "pi-agent/prompts/{name}.md"),
    }
    for entry in entries:
        if entry.kind == "extension":
            code = str(entry.config["code"])
            files[f"pi-agent/extensions/{entry.name}.ts"] = code if code.endswith("\n") else code + "\n"
    files[RENDERS["config"]] = json_file(tree_config(entries, REFUSED_SETTINGS, RENDERS["config"]))
    return sorted_files(files)


MODELS = "pi-agent/models.json"
SETTINGS = "pi-agent/settings.json"
# What pi itself writes into settings.json (preferences); every other key keeps what the install wrote. The default
# provider and model are not among them: they are the model binding, and another one would bypass reef.
PREFERENCE_KEYS = frozenset({"lastChangelogVersion", "defaultThinkingLevel", "theme", "hideThinkingBlock"})
# Where pi loads instructions, code and settings from in its agent directory.
LOADED = (
    "pi-agent/AGENTS.md",
    "pi-agent/CLAUDE.md",
    "pi-agent/SYSTEM.md",
    "pi-agent/APPEND_SYSTEM.md",
    "pi-agent/models.json",
    "pi-agent/settings.json",
    "pi-agent/extensions",
    "pi-agent/skills",
    "pi-agent/prompts",
    "pi-agent/themes",
)


def bind(files: dict[str, str], binding: Binding) -> dict[str, str]:
    """Add the `reef` provider (token by variable name, scenario and tags as headers) and make it the default."""
    provider = {
        "baseUrl": f"{binding.url}/v1",
        "api": "openai-completions",
        "apiKey": TOKEN_ENV,  # pi reads a value naming an environment variable from that variable
        "headers": {**reef_headers(binding), SESSION_HEADER: SESSION_ENV},
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [{"id": binding.model}],
    }
    settings = json.loads(files.get(SETTINGS, "{}"))
    settings.update(defaultProvider="reef", defaultModel=binding.model)
    return sorted_files(
        files,
        {
            MODELS: json_file({"providers": {"reef": provider}}),
            SETTINGS: json_file(settings),
        },
    )


def _env(root: Path, binding: Binding) -> dict[str, str]:
    # Offline at start: pi would otherwise try to download fd and ripgrep at each start where they are missing
    # (waiting on the network where there is none); the ones on PATH are used. A PI_OFFLINE of the person's wins.
    offline = os.environ.get(OFFLINE_ENV) or "1"
    return {"PI_CODING_AGENT_DIR": str(root / "pi-agent"), "PI_SKIP_VERSION_CHECK": "1", OFFLINE_ENV: offline}


EXTENSION = Entry(
    "reef-requests",
    "extension",
    {"name": "reef-requests", "code": resources.files("adapters").joinpath("pi_reef_extension.ts").read_text()},
)

ADAPTER = Adapter(
    name="pi",
    title="pi coding agent",
    binary="pi",
    renders=RENDERS,
    render=render,
    agent=AgentSide(
        package="npm install -g @mariozechner/pi-coding-agent",
        bind=bind,
        env=_env,
        reef_entries=(EXTENSION,),
        headless=lambda prompt: ["-p", prompt],
        state_keys={SETTINGS: PREFERENCE_KEYS},
        loaded=LOADED,
        offline_env={OFFLINE_ENV: "1"},
    ),
    notes=(
        "commands are prompt templates typed as /<name>",
        "extensions run in pi's process; they are held for review",
    ),
)
