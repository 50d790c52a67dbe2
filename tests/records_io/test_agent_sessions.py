"""Session files of real agents imported as records: pi and codex sessions written by the real CLIs in this test
(headless, against the fake model), and a Claude Code transcript built from its documented format. Each session is
one record with its messages, tool calls, model, original time and session id, marked as imported; the SAO trainer
refuses imported records and says why."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import pytest

from recipes.sao.rollout import Staleness, judge_report
from reef_contract import StoredRecord
from reef_daemon.recipe_api import Ineligible, ReferencedRecord, Unit
from tests.support.cli_testing import Daemon
from tests.support.fixtures import FindAgent

QUESTION = "What is the capital of France?"
ANSWER = "The capital of France is Paris."


def run(command: list[str], env: dict[str, str], cwd: Path) -> None:
    base = {key: os.environ[key] for key in ("PATH", "LANG", "TERM") if key in os.environ}
    done = subprocess.run(
        command, env={**base, **env}, cwd=cwd, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Paris" in done.stdout


def pi_session(pi: Path, upstream_url: str, home: Path) -> Path:
    """A session file the real pi writes for one headless prompt."""
    config = home / "pi"
    config.mkdir(parents=True)
    provider = {
        "baseUrl": f"{upstream_url}/v1",
        "api": "openai-completions",
        "apiKey": "MODEL_KEY",
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [{"id": "fake-model", "contextWindow": 100000, "maxTokens": 100}],
    }
    (config / "models.json").write_text(json.dumps({"providers": {"local": provider}}))
    env = {"PI_CODING_AGENT_DIR": str(config), "PI_OFFLINE": "1", "MODEL_KEY": "unused", "HOME": str(home)}
    run([str(pi), "--provider", "local", "--model", "fake-model", "-p", QUESTION], env, home)
    (session,) = (config / "sessions").rglob("*.jsonl")
    return session


def codex_rollout(codex: Path, upstream_url: str, home: Path) -> Path:
    """A rollout file the real codex writes for one `codex exec`."""
    codex_home = home / "codex"
    codex_home.mkdir(parents=True)
    (codex_home / "config.toml").write_text(
        'model = "fake-model"\nmodel_provider = "local"\n[model_providers.local]\nname = "local"\n'
        f'base_url = "{upstream_url}/v1"\nenv_key = "MODEL_KEY"\nwire_api = "responses"\n'
    )
    env = {"CODEX_HOME": str(codex_home), "MODEL_KEY": "unused", "HOME": str(home)}
    run([str(codex), "exec", "--skip-git-repo-check", QUESTION], env, home)
    (rollout,) = (codex_home / "sessions").rglob("rollout-*.jsonl")
    return rollout


def first_line(path: Path) -> dict[str, Any]:
    line: dict[str, Any] = json.loads(path.read_text().splitlines()[0])
    return line


def imported_record(daemon: Daemon, scenario: str) -> dict[str, Any]:
    (row,) = daemon.get("/reef/records", scenario=scenario, type="inference")["records"]
    return daemon.record(row["id"])


@pytest.mark.parametrize("agent_name", ["pi", "codex"])
def test_a_real_agent_session_is_imported(
    daemon: Daemon, upstream_url: str, tmp_path: Path, agent_name: str, agent_cli: FindAgent
) -> None:
    write_session = pi_session if agent_name == "pi" else codex_rollout
    session = write_session(agent_cli(agent_name), upstream_url, tmp_path)
    done = daemon.reef("import", str(tmp_path / agent_name), "--scenario", f"{agent_name}-import")
    assert done.returncode == 0, done.stderr
    assert "imported 1, skipped 0 as duplicate, refused 0" in done.stderr

    record = imported_record(daemon, f"{agent_name}-import")
    header = first_line(session)
    session_id = header["id"] if agent_name == "pi" else header["payload"]["id"]
    started = datetime.fromisoformat(header["timestamp"].replace("Z", "+00:00")).timestamp()
    assert record["tags"] == {"imported": agent_name, "session": session_id}
    assert record["model"] == "fake-model" and record["route"] == "/v1/chat/completions"
    assert abs(record["created_at"] - started) < 1.0
    assert record["timings"]["duration_ms"] is not None and record["timings"]["duration_ms"] >= 0
    asked = [m for m in record["request"]["messages"] if m["role"] == "user"]
    assert asked[-1]["content"] == QUESTION
    assert record["answer"]["parts"] == [{"type": "text", "text": ANSWER}]
    assert record["score"] is None  # awaiting a score like any other record
    again = daemon.reef("import", str(session), "--scenario", f"{agent_name}-import")
    assert again.returncode == 0 and "imported 0, skipped 1 as duplicate" in again.stderr


def claude_line(kind: str, uuid: str, parent: str | None, at: str, message: dict[str, Any], **extra: Any) -> str:
    line = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/work/app",
            "sessionId": "5c1e4d2a-0b7f-4c3e-9a61-2f8d7e6c5b4a", "version": "2.0.31", "type": kind,
            "message": message, "uuid": uuid, "timestamp": at, **extra}  # fmt: skip
    return json.dumps(line)


def claude_transcript(path: Path) -> Path:
    """A Claude Code transcript in its documented shape: one line per event, an assistant turn split over a line per
    content block, a tool result as a user line, a subagent's line (sidechain), summary and system lines."""
    model = "claude-sonnet-4-5-20250929"
    lines = [
        json.dumps({"type": "summary", "summary": "Weather in Paris", "leafUuid": "a3"}),
        claude_line("user", "u1", None, "2026-01-05T10:00:00.000Z", {"role": "user", "content": "Weather in Paris?"}),
        claude_line("assistant", "a1", "u1", "2026-01-05T10:00:02.000Z", {
            "id": "msg_01", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": "Let me check."}], "usage": {"input_tokens": 20, "output_tokens": 4},
        }),
        claude_line("assistant", "a2", "a1", "2026-01-05T10:00:03.000Z", {
            "id": "msg_01", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "tool_use", "id": "toolu_01", "name": "Bash",
                         "input": {"command": "curl -s wttr.in/Paris"}}],
        }),
        claude_line("user", "u2", "a2", "2026-01-05T10:00:05.000Z", {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "sunny, 21C"}
        ]}, toolUseResult={"stdout": "sunny, 21C"}),
        claude_line("user", "s1", "u2", "2026-01-05T10:00:06.000Z", {"role": "user", "content": "subagent task"},
                    isSidechain=True),
        claude_line("assistant", "a3", "u2", "2026-01-05T10:00:08.000Z", {
            "id": "msg_02", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "thinking", "thinking": "Easy."}, {"type": "text", "text": "Sunny, 21C."}],
        }),
        json.dumps({"type": "system", "content": "Conversation compacted", "uuid": "y1",
                    "timestamp": "2026-01-05T10:00:09.000Z"}),
    ]  # fmt: skip
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_claude_code_transcript_is_imported_and_sao_refuses_it(daemon: Daemon, tmp_path: Path) -> None:
    transcript = claude_transcript(tmp_path / "projects" / "-work-app" / "5c1e4d2a.jsonl")
    done = daemon.reef("import", str(tmp_path / "projects"), "--scenario", "claude-import")
    assert done.returncode == 0, done.stderr

    record = imported_record(daemon, "claude-import")
    assert record["tags"] == {"imported": "claude-code", "session": "5c1e4d2a-0b7f-4c3e-9a61-2f8d7e6c5b4a"}
    assert record["model"] == "claude-sonnet-4-5-20250929"
    assert record["created_at"] == datetime.fromisoformat("2026-01-05T10:00:00+00:00").timestamp()
    assert record["timings"]["duration_ms"] == 8000
    assert record["request"]["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [{
            "id": "toolu_01", "type": "function",
            "function": {"name": "Bash", "arguments": '{"command": "curl -s wttr.in/Paris"}'},
        }]},
        {"role": "tool", "tool_call_id": "toolu_01", "content": "sunny, 21C"},
    ]  # fmt: skip
    assert record["answer"]["parts"] == [{"type": "text", "text": "Sunny, 21C."}]

    scored = daemon.reef("score", record["id"], "1")
    assert scored.returncode == 0, scored.stderr
    stored = cast(ReferencedRecord, {**daemon.record(record["id"]), "consumed_by_step": None})
    report = Unit(cast(StoredRecord, {"id": "probe", "score": 1.0}), (stored,))
    verdict, rollout = judge_report(report, "v:1", Staleness(10, 10), set())
    assert rollout is None and isinstance(verdict, Ineligible)
    assert verdict.reason.startswith("imported: no log-probs")
    assert transcript.exists()
