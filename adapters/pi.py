"""pi (the pi coding agent): everything lives under `pi-agent/`, which `PI_CODING_AGENT_DIR` points at."""

from __future__ import annotations

import json

from adapters._base import (
    Adapter,
    first_line,
    merged_config,
    refuse_keys,
    refuse_unrenderable,
    rules_file,
    with_frontmatter,
)
from reef_daemon.harness.tree import Entry

RENDERS = {
    "rules": "pi-agent/AGENTS.md",
    "skill": "pi-agent/skills/<name>/SKILL.md",
    "command": "pi-agent/prompts/<name>.md",
    "extension": "pi-agent/extensions/<name>.ts",
    "config": "pi-agent/settings.json",
}
# The model binding is added at install time; a tree may not choose or redirect the model.
REFUSED_SETTINGS = {
    "defaultProvider": "the model binding is set by the install script",
    "defaultModel": "the model binding is set by the install script",
    "enabledModels": "the model binding is set by the install script",
    "providers": "only reef's own provider is configured, by the install script",
    "httpProxy": "model traffic must go to reef directly",
}


def render(entries: list[Entry]) -> dict[str, str]:
    """The pi-agent directory for a tree."""
    refuse_unrenderable("pi", entries, RENDERS)
    files: dict[str, str] = {}
    rules = rules_file(entries)
    if rules is not None:
        files["pi-agent/AGENTS.md"] = rules
    for entry in entries:
        text = str(entry.config.get("text", ""))
        if entry.kind == "skill":
            fields = {"name": entry.name, "description": first_line(text)}
            files[f"pi-agent/skills/{entry.name}/SKILL.md"] = with_frontmatter(text, fields)
        elif entry.kind == "command":
            files[f"pi-agent/prompts/{entry.name}.md"] = with_frontmatter(text, {"description": first_line(text)})
        elif entry.kind == "extension":
            code = str(entry.config["code"])
            files[f"pi-agent/extensions/{entry.name}.ts"] = code if code.endswith("\n") else code + "\n"
    settings = merged_config(entries)
    refuse_keys(settings, REFUSED_SETTINGS, "pi-agent/settings.json")
    files["pi-agent/settings.json"] = json.dumps(settings, indent=2, sort_keys=True) + "\n"
    return dict(sorted(files.items()))


ADAPTER = Adapter(
    name="pi",
    title="pi coding agent",
    binary="pi",
    renders=RENDERS,
    render=render,
    notes=(
        "commands are prompt templates typed as /<name>",
        "extensions run in pi's process; they are held for review",
    ),
)
