"""Renderer goldens: each adapter, each kind it renders, compared with files under goldens/.

Set REEF_UPDATE_GOLDENS=1 to rewrite them after a deliberate change (and read the diff).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from adapters import ADAPTERS, RenderRefused, get_adapter
from reef_harness import Entry

GOLDENS = Path(__file__).parent / "goldens"
SAMPLES = {
    "rules": Entry("house-rules", "rules", {"text": "Run the tests before you say done."}),
    "skill": Entry("changelog", "skill", {"name": "changelog", "text": "# Write changelogs\nKeep entries short."}),
    "command": Entry("review", "command", {"name": "review", "text": "Review the staged diff for bugs."}),
    "extension": Entry(
        "notify",
        "extension",
        {"name": "notify", "code": "export default function (pi) {\n  pi.on('agent_end', () => {});\n}"},
    ),
    "config": Entry("quiet", "config", {"data": {"quietStartup": True}}),
}
CONFIG = {
    "pi": {"quietStartup": True},
    "codex": {"hide_agent_reasoning": True},
    "dsh": {"agent-loop": {"config": {"maxTurns": 40}}},
    "claude": {"includeCoAuthoredBy": False},
    "opencode": {"theme": "system"},
}
CASES = [(name, kind) for name, adapter in ADAPTERS.items() for kind in adapter.renders]


def _sample(adapter: str, kind: str) -> Entry:
    if kind == "config":
        return Entry("settings", "config", {"data": CONFIG[adapter]})
    return SAMPLES[kind]


@pytest.mark.parametrize(("adapter", "kind"), CASES)
def test_each_kind_renders_as_the_golden(adapter: str, kind: str) -> None:
    files = get_adapter(adapter).render([_sample(adapter, kind)])
    golden = GOLDENS / f"{adapter}-{kind}.json"
    if os.environ.get("REEF_UPDATE_GOLDENS"):
        golden.write_text(json.dumps(files, indent=2, sort_keys=True) + "\n")
    assert files == json.loads(golden.read_text())


def test_the_empty_tree_renders_only_safe_defaults() -> None:
    assert get_adapter("pi").render([]) == {"pi-agent/settings.json": "{}\n"}
    assert "network_access = false" in get_adapter("codex").render([])["codex/config.toml"]
    assert "session-telemetry-otel" in get_adapter("dsh").render([])["dsh/profiles/headless/cordis.patch.yml"]


@pytest.mark.parametrize("adapter", ["codex", "dsh"])
def test_extensions_render_only_on_pi(adapter: str) -> None:
    with pytest.raises(RenderRefused, match=f"entry 'notify' is of kind extension, which {adapter} cannot load"):
        get_adapter(adapter).render([SAMPLES["extension"]])


@pytest.mark.parametrize(
    ("adapter", "instead"),
    [("claude", "Claude Code runs no extensions"), ("opencode", "opencode's extensions are plugins")],
)
def test_claude_and_opencode_refuse_extensions_naming_what_to_use_instead(adapter: str, instead: str) -> None:
    with pytest.raises(RenderRefused) as refused:
        get_adapter(adapter).render([SAMPLES["extension"]])
    assert str(refused.value).startswith(f"entry 'notify' is an extension: {instead}")
    assert "use a skill for what the model should know or do, or a command" in str(refused.value)


@pytest.mark.parametrize(
    ("adapter", "data", "why"),
    [
        ("claude", {"hooks": {"Stop": []}}, "runs shell commands outside a session's permission checks"),
        ("claude", {"statusLine": {"type": "command", "command": "x"}}, "runs shell commands outside"),
        ("opencode", {"plugin": ["opencode-helicone"]}, "runs code outside reef's review"),
        ("opencode", {"mcp": {"x": {"type": "local"}}}, "runs code outside reef's review"),
        ("opencode", {"autoupdate": True}, "safe default"),
    ],
)
def test_claude_and_opencode_refuse_settings_that_run_code_or_reach_out(
    adapter: str, data: dict[str, object], why: str
) -> None:
    with pytest.raises(RenderRefused, match=why):
        get_adapter(adapter).render([Entry("settings", "config", {"data": data})])


def test_claude_and_opencode_start_quiet() -> None:
    claude = json.loads(get_adapter("claude").render([])["claude/settings.json"])
    assert (
        claude["env"]["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1" and claude["env"]["DISABLE_TELEMETRY"] == "1"
    )
    assert claude["env"]["DISABLE_AUTOUPDATER"] == "1"
    opencode = json.loads(get_adapter("opencode").render([])["opencode/config/opencode/opencode.json"])
    assert opencode == {"$schema": "https://opencode.ai/config.json", "autoupdate": False, "share": "disabled"}


def test_codex_refuses_a_skill_and_a_command_with_one_name() -> None:
    twin = Entry("review-skill", "skill", {"name": "review", "text": "x"})
    with pytest.raises(RenderRefused, match="named 'review' like another skill or command"):
        get_adapter("codex").render([SAMPLES["command"], twin])


@pytest.mark.parametrize(
    ("adapter", "data", "message"),
    [
        ("pi", {"defaultModel": "x"}, "may not set 'defaultModel'"),
        ("codex", {"approval_policy": "never"}, "may not set 'approval_policy'"),
        ("codex", {"model_providers": {}}, "model binding is set by the install script"),
        ("dsh", {"llm-pi-ai": {"config": {}}}, "may not set 'llm-pi-ai'"),
        ("claude", {"env": {"ANTHROPIC_BASE_URL": "https://api.anthropic.com"}}, "may not set 'env'"),
        ("claude", {"apiKeyHelper": "echo key"}, "model binding is set by the install script"),
        ("opencode", {"provider": {}}, "may not set 'provider'"),
        ("opencode", {"model": "anthropic/claude"}, "model binding is set by the install script"),
    ],
)
def test_the_model_binding_is_never_part_of_a_tree(adapter: str, data: dict[str, object], message: str) -> None:
    with pytest.raises(RenderRefused, match=message):
        get_adapter(adapter).render([Entry("c", "config", {"data": data})])


def test_existing_frontmatter_is_kept_and_rules_are_joined_in_order() -> None:
    own = Entry("own", "skill", {"name": "own", "text": "---\nname: own\ndescription: mine\n---\nBody"})
    second = Entry("more-rules", "rules", {"text": "Prefer small diffs."})
    files = get_adapter("pi").render([SAMPLES["rules"], own, second])
    assert files["pi-agent/skills/own/SKILL.md"] == "---\nname: own\ndescription: mine\n---\nBody\n"
    assert files["pi-agent/AGENTS.md"] == "Run the tests before you say done.\n\nPrefer small diffs.\n"
