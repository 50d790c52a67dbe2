"""dsh (DeepSeek Harness): its home `dsh/` (`DSH_HOME`) holds rules, skills and the headless profile's patch;
commands are user-invocable skills in the second skill root `dsh-agents/` (`DSH_AGENTS_HOME`).

The tree's config is an object keyed by plugin id; dsh wants a YAML list of `{id, ...}` rows.
"""

from __future__ import annotations

from typing import Any

import yaml

from adapters._base import (
    Adapter,
    RenderRefused,
    deep_merge,
    first_line,
    merged_config,
    refuse_keys,
    refuse_unrenderable,
    rules_file,
    with_frontmatter,
)
from reef_daemon.harness.tree import Entry

PATCH = "dsh/profiles/headless/cordis.patch.yml"
RENDERS = {
    "rules": "dsh/AGENTS.md",
    "skill": "dsh/skills/<name>/SKILL.md",
    "command": "dsh-agents/skills/<name>/SKILL.md (typed as /<name>)",
    "config": PATCH,
}
# Session logs stay readable and nothing leaves the machine for titles or telemetry.
DEFAULTS: dict[str, Any] = {
    "session-persistence-jsonl": {"config": {"compression": "none"}},
    "session-title-llm": {"disabled": True},
    "session-telemetry-otel": {"disabled": True},
}
_SAFETY = "reef keeps this plugin at its safe default"
REFUSED_PLUGINS = {
    "llm-pi-ai": "the model binding is set by the install script",
    "agent-default-model": "the model binding is set by the install script",
    "session-persistence-jsonl": _SAFETY,
    "session-title-llm": _SAFETY,
    "session-telemetry-otel": _SAFETY,
}


def render(entries: list[Entry]) -> dict[str, str]:
    """The dsh home and command skill root for a tree."""
    refuse_unrenderable("dsh", entries, RENDERS)
    files: dict[str, str] = {}
    rules = rules_file(entries)
    if rules is not None:
        files["dsh/AGENTS.md"] = rules
    for entry in entries:
        text = str(entry.config.get("text", ""))
        fields: dict[str, str | bool] = {"name": entry.name, "description": first_line(text)}
        if entry.kind == "skill":
            files[f"dsh/skills/{entry.name}/SKILL.md"] = with_frontmatter(text, fields)
        elif entry.kind == "command":
            fields["disable-model-invocation"] = True
            files[f"dsh-agents/skills/{entry.name}/SKILL.md"] = with_frontmatter(text, fields)
    plugins = merged_config(entries)
    refuse_keys(plugins, REFUSED_PLUGINS, PATCH)
    for plugin, settings in plugins.items():
        if not isinstance(settings, dict):
            raise RenderRefused(f"config for plugin '{plugin}' must be an object such as {{\"config\": {{...}}}}")
    merged = deep_merge(deep_merge({}, DEFAULTS), plugins)
    rows = [{"id": plugin, **merged[plugin]} for plugin in sorted(merged)]
    files[PATCH] = yaml.safe_dump(rows, sort_keys=True, allow_unicode=True)
    return dict(sorted(files.items()))


ADAPTER = Adapter(
    name="dsh",
    title="DeepSeek Harness",
    binary="dsh",
    renders=RENDERS,
    render=render,
    notes=("commands are user-invocable skills typed as /<name>", "extensions are refused"),
)
