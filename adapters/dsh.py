"""dsh (DeepSeek Harness): its home `dsh/` (`DSH_HOME`) holds rules, skills and the headless profile's patch;
commands are user-invocable skills in the second skill root `dsh-agents/` (`DSH_AGENTS_HOME`).

The tree's config is an object keyed by plugin id; dsh wants a YAML list of `{id, ...}` rows. The model binding is
a `reef` provider of the `llm-pi-ai` plugin speaking Anthropic Messages (what dsh speaks), in a patch of its own
that the wrapper applies to whichever profile runs; /reefine and /versions are user-invocable skills.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from adapters._agent import BINDING_IS_REEFS, SESSION_ENV, AgentSide, Binding, reef_headers
from adapters._base import Adapter, RenderRefused, first_line, sorted_files, start_files, tree_config, with_frontmatter
from adapters._reef_commands import reef_commands
from reef_contract import SESSION_HEADER, TOKEN_ENV
from reef_harness import Entry


class _Js(str):
    """A dsh loader expression, written as a `!!js` YAML scalar."""


class _PatchDumper(yaml.SafeDumper):
    pass


_PatchDumper.add_representer(_Js, lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:js", str(value)))


PATCH = "dsh/profiles/headless/cordis.patch.yml"
RENDERS = {
    "rules": "dsh/AGENTS.md",
    "skill": "dsh/skills/<name>/SKILL.md",
    "command": "dsh-agents/skills/<name>/SKILL.md (typed as /<name>)",
    "config": PATCH,
}
# Session logs stay readable and nothing leaves the machine for titles or telemetry. The session store's config
# keeps its required root (dsh's own default) beside the compression.
DEFAULTS: dict[str, Any] = {
    "session-persistence-jsonl": {"config": {"root": _Js("dshHomePath('sessions')"), "compression": "none"}},
    "session-title-llm": {"disabled": True},
    "session-telemetry-otel": {"disabled": True},
}
_SAFETY = "reef keeps this plugin at its safe default"
REFUSED_PLUGINS = {
    "llm-pi-ai": BINDING_IS_REEFS,
    "agent-default-model": BINDING_IS_REEFS,
    "session-persistence-jsonl": _SAFETY,
    "session-title-llm": _SAFETY,
    "session-telemetry-otel": _SAFETY,
}


def render(entries: list[Entry]) -> dict[str, str]:
    """The dsh home and command skill root for a tree."""
    files = start_files("dsh", entries, RENDERS)
    for entry in entries:
        text = str(entry.config.get("text", ""))
        fields: dict[str, str | bool] = {"name": entry.name, "description": first_line(text)}
        if entry.kind == "skill":
            files[f"dsh/skills/{entry.name}/SKILL.md"] = with_frontmatter(text, fields)
        elif entry.kind == "command":
            fields["disable-model-invocation"] = True
            files[f"dsh-agents/skills/{entry.name}/SKILL.md"] = with_frontmatter(text, fields)
    plugins = tree_config(entries, REFUSED_PLUGINS, PATCH, DEFAULTS)
    for plugin, settings in plugins.items():
        if not isinstance(settings, dict):
            raise RenderRefused(f"config for plugin '{plugin}' must be an object such as {{\"config\": {{...}}}}")
    rows = [{"id": plugin, **plugins[plugin]} for plugin in sorted(plugins)]
    files[PATCH] = yaml.dump(rows, Dumper=_PatchDumper, sort_keys=True, allow_unicode=True)
    return sorted_files(files)


BINDING_PATCH = "dsh/reef-binding.patch.yml"
# Where dsh loads instructions, skills and profiles (plugin patches) from; it writes each profile's root entry list
# and package files itself.
LOADED = ("dsh/AGENTS.md", BINDING_PATCH, "dsh/skills", "dsh/profiles", "dsh-agents")
OWN_FILES = ("dsh/profiles/*/cordis.yml", "dsh/profiles/*/package.json", "dsh/profiles/*/pnpm-workspace.yaml")


def bind(files: dict[str, str], binding: Binding) -> dict[str, str]:
    """A patch adding the `reef` provider (token from a variable, scenario and tags as headers) as the default."""
    provider = {
        "displayName": "reef",
        "api": "anthropic-messages",
        "apiKeyEnv": TOKEN_ENV,
        "baseURL": binding.url,
        "headers": {**reef_headers(binding), SESSION_HEADER: _Js(f"process.env.{SESSION_ENV} ?? ''")},
        "models": [{"id": binding.model}],
    }
    rows = [
        {"id": "llm-pi-ai", "config": {"providers": {"reef": provider}}},
        {"id": "agent-default-model", "config": {"provider": "reef", "model": binding.model}},
    ]
    patch = yaml.dump(rows, Dumper=_PatchDumper, sort_keys=True, allow_unicode=True)
    return sorted_files(files, {BINDING_PATCH: patch})


def _env(root: Path, binding: Binding) -> dict[str, str]:
    return {
        "DSH_HOME": str(root / "dsh"),
        "DSH_AGENTS_HOME": str(root / "dsh-agents"),
        "DSH_TELEMETRY_MODE": "DISABLED",
        # dsh's built-in provider reads this; pointed at reef, nothing can reach another model by accident.
        "DEEPSEEK_BASE_URL": binding.url,
    }


def _args(root: Path, args: list[str]) -> list[str]:
    """`[profile] [app args]` (the profile defaults to headless) with the binding patch applied after the profile.
    A first argument of several words is the headless profile's task (`reef-dsh "fix the tests"`), not a profile
    name (a folder's name: one word)."""
    named = bool(args) and not args[0].startswith("-") and len(args[0].split()) == 1
    profile, rest = (args[0], args[1:]) if named else ("headless", args)
    return ["--profile", profile, "--patch", str(root / BINDING_PATCH), *rest]


ADAPTER = Adapter(
    name="dsh",
    title="DeepSeek Harness",
    binary="dsh",
    renders=RENDERS,
    render=render,
    agent=AgentSide(
        package="pip install deepseek-harness-runtime-bin",
        bind=bind,
        env=_env,
        args=_args,
        reef_entries=reef_commands("dsh", "/"),
        headless=lambda prompt: ["headless", prompt],
        loaded=LOADED,
        own_files=OWN_FILES,
    ),
    notes=("commands are user-invocable skills typed as /<name>", "extensions are refused"),
)
