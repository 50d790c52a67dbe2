"""The real pi, Codex, Claude Code and opencode CLIs, each run headless through reef to the embedded model."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.support.embedded_running import RunningReef
from tests.support.fixtures import FindAgent

PROMPT = "What is the capital of France? Answer in one sentence."


def run(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    base = {key: os.environ[key] for key in ("PATH", "LANG", "TERM") if key in os.environ}
    return subprocess.run(
        command, env={**base, **env}, cwd=cwd, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL
    )


def test_pi_answers_through_reef(reef: RunningReef, tmp_path: Path, agent_cli: FindAgent) -> None:
    pi = agent_cli("pi")
    config = tmp_path / "pi"
    config.mkdir()
    provider = {
        "baseUrl": f"{reef.url}/v1",
        "api": "openai-completions",
        "apiKey": "REEF_API_KEY",
        "headers": {"x-reef-scenario": "pi"},
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [{"id": "smollm2", "contextWindow": 8192, "maxTokens": 24}],
    }
    (config / "models.json").write_text(json.dumps({"providers": {"reef": provider}}))
    # pi compacts a session whose context nears the window less a 16k reserve: with this model's 8k, at once.
    (config / "settings.json").write_text(json.dumps({"compaction": {"enabled": False}}))
    env = {"PI_CODING_AGENT_DIR": str(config), "PI_OFFLINE": "1", "REEF_API_KEY": "unused", "HOME": str(tmp_path)}
    done = run([str(pi), "--provider", "reef", "--model", "smollm2", "--no-session", "-p", PROMPT], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    (record,) = reef.records("pi")
    assert record["route"] == "/v1/chat/completions" and record["complete"] is True
    assert reef.record(record["id"])["tokens"]["output_ids"]


def test_codex_answers_through_reef(reef: RunningReef, tmp_path: Path, agent_cli: FindAgent) -> None:
    codex = agent_cli("codex")
    home = tmp_path / "codex"
    home.mkdir()
    # Codex's own instructions are ~4k tokens, ~30 s of prompt reading on two cores: a short file keeps it quick.
    instructions = tmp_path / "instructions.md"
    instructions.write_text("You are Codex, a coding agent. Answer briefly.\n")
    (home / "config.toml").write_text(
        f'model_instructions_file = "{instructions}"\n'
        'model = "smollm2"\n'
        'model_provider = "reef"\n'
        "[model_providers.reef]\n"
        'name = "reef"\n'
        f'base_url = "{reef.url}/v1"\n'
        'env_key = "REEF_API_KEY"\n'
        'wire_api = "responses"\n'
        'http_headers = { "x-reef-scenario" = "codex" }\n'
    )
    env = {"CODEX_HOME": str(home), "REEF_API_KEY": "unused", "HOME": str(tmp_path)}
    done = run([str(codex), "exec", "--skip-git-repo-check", PROMPT], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    records = reef.records("codex")
    assert records and all(r["route"] == "/v1/responses" for r in records)
    assert any(reef.record(r["id"]).get("tokens") for r in records)


def test_claude_answers_through_reef(reef: RunningReef, tmp_path: Path, agent_cli: FindAgent) -> None:
    claude = agent_cli("claude")
    config = tmp_path / "claude"
    config.mkdir()
    env = {
        "CLAUDE_CONFIG_DIR": str(config),
        "HOME": str(tmp_path),
        "ANTHROPIC_BASE_URL": reef.url,
        "ANTHROPIC_AUTH_TOKEN": "unused",
        "ANTHROPIC_CUSTOM_HEADERS": "x-reef-scenario: claude",
        "ANTHROPIC_MODEL": "smollm2",
        "ANTHROPIC_SMALL_FAST_MODEL": "smollm2",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "256",
    }
    # Claude Code's own prompt and tools outgrow this model's 8k context: a one-line prompt and one tool. The Agent
    # tool makes it list the agent types in a `system` turn inside `messages`, as every full run does.
    argv = [str(claude), "-p", PROMPT, "--system-prompt", "Answer briefly.", "--tools", "Agent"]
    done = run(argv, env, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip()
    records = reef.records("claude")
    assert records and all(r["route"] in ("/v1/messages", "/v1/messages/count_tokens") for r in records)
    assert any(reef.record(r["id"]).get("tokens") for r in records)


def test_opencode_answers_through_reef(reef: RunningReef, tmp_path: Path, agent_cli: FindAgent) -> None:
    opencode = agent_cli("opencode")
    folders = {f"XDG_{name}_HOME": str(tmp_path / name.lower()) for name in ("CONFIG", "DATA", "STATE", "CACHE")}
    config = tmp_path / "config" / "opencode"
    (config / "node_modules").mkdir(parents=True)
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "options": {"baseURL": f"{reef.url}/v1", "apiKey": "unused", "headers": {"x-reef-scenario": "opencode"}},
        "models": {"smollm2": {"name": "smollm2", "limit": {"context": 8192, "output": 64}}},
    }
    # opencode's own prompt and tools outgrow this model's 8k context: a one-line prompt and no tools.
    settings = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {"reef": provider},
        "model": "reef/smollm2",
        "small_model": "reef/smollm2",
        "enabled_providers": ["reef"],
        "autoupdate": False,
        "share": "disabled",
        "tools": {"*": False},
        "agent": {"build": {"prompt": "Answer briefly."}},
    }
    (config / "opencode.json").write_text(json.dumps(settings))
    env = {**folders, "HOME": str(tmp_path), "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1"}
    done = run([str(opencode), "run", PROMPT], env, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip()
    records = reef.records("opencode")
    assert records and all(r["route"] == "/v1/chat/completions" for r in records)
    assert any(reef.record(r["id"]).get("tokens") for r in records)
