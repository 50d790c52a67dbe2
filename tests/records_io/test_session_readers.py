"""The session readers on the shapes real files take: a pi session that branched (a redone turn), a codex rollout
with function calls, a Claude Code subagent's own transcript, and format detection."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reef_transcripts.sessions import BadLine, Conversation, detect_format, read_conversations


def write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def only_conversation(path: Path) -> Conversation:
    (item,) = list(read_conversations(path))
    assert isinstance(item, Conversation), item
    return item


def pi_message(entry: str, parent: str | None, message: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "id": entry, "parentId": parent, "timestamp": "2026-02-01T09:00:00Z", "message": message}


def test_a_branched_pi_session_is_read_along_its_last_branch(tmp_path: Path) -> None:
    session = write(tmp_path / "pi.jsonl", [
        {"type": "session", "version": 3, "id": "s-1", "timestamp": "2026-02-01T09:00:00Z", "cwd": "/w"},
        pi_message("u1", None, {"role": "user", "content": [{"type": "text", "text": "list files"}]}),
        pi_message("a1", "u1", {"role": "assistant", "model": "m1", "content": [
            {"type": "thinking", "thinking": "hmm"},
            {"type": "toolCall", "id": "t1", "name": "bash", "arguments": {"command": "ls"}},
        ]}),
        pi_message("r1", "a1", {"role": "toolResult", "toolCallId": "t1", "toolName": "bash",
                                "content": [{"type": "text", "text": "a.txt"}], "isError": False}),
        pi_message("a2", "r1", {"role": "assistant", "model": "m1", "content": [{"type": "text", "text": "old"}]}),
        pi_message("a3", "r1", {"role": "assistant", "model": "m2", "content": [{"type": "text", "text": "a.txt"}]}),
    ])  # fmt: skip
    read = only_conversation(session)
    assert detect_format(session) == "pi" and read.session == "s-1" and read.model == "m2"
    assert read.messages == [
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "a.txt"},
        {"role": "assistant", "content": "a.txt"},
    ]  # fmt: skip


def test_a_codex_rollout_merges_an_answer_and_its_calls(tmp_path: Path) -> None:
    def item(payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": "2026-02-01T09:00:01Z", "type": "response_item", "payload": payload}

    rollout = write(tmp_path / "rollout-x.jsonl", [
        {"timestamp": "2026-02-01T09:00:00Z", "type": "session_meta", "payload": {"id": "c-1"}},
        {"timestamp": "2026-02-01T09:00:00Z", "type": "turn_context", "payload": {"model": "gpt-x"}},
        item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]}),
        item({"type": "reasoning", "summary": []}),
        item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]}),
        item({"type": "function_call", "name": "shell", "arguments": '{"cmd":"ls"}', "call_id": "f1"}),
        item({"type": "function_call", "name": "shell", "arguments": '{"cmd":"pwd"}', "call_id": "f2"}),
        item({"type": "function_call_output", "call_id": "f1", "output": "a.py"}),
        item({"type": "function_call_output", "call_id": "f2", "output": {"content": "/w"}}),
        item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}),
        {"timestamp": "2026-02-01T09:00:02Z", "type": "event_msg", "payload": {"type": "task_complete"}},
    ])  # fmt: skip
    read = only_conversation(rollout)
    assert (read.session, read.model, read.duration_ms) == ("c-1", "gpt-x", 1000.0)
    assert [m["role"] for m in read.messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert read.messages[1]["content"] == "Looking."
    assert [c["id"] for c in read.messages[1]["tool_calls"]] == ["f1", "f2"]
    assert read.messages[3]["content"] == "/w"


def test_a_claude_code_subagent_transcript_is_its_sidechain(tmp_path: Path) -> None:
    def line(kind: str, content: Any) -> dict[str, Any]:
        return {"type": kind, "isSidechain": True, "sessionId": "s", "timestamp": "2026-02-01T09:00:00Z",
                "message": {"role": kind, "content": content}}  # fmt: skip

    transcript = write(tmp_path / "agent-1.jsonl", [
        line("user", "search the code"), line("assistant", [{"type": "text", "text": "found it"}]),
    ])  # fmt: skip
    read = only_conversation(transcript)
    assert read.format == "claude-code" and read.messages[-1] == {"role": "assistant", "content": "found it"}


@pytest.mark.parametrize(
    ("first", "found"),
    [
        ({"messages": []}, "openai"),
        ({"type": "session", "version": 3}, "pi"),
        ({"timestamp": "t", "type": "session_meta", "payload": {}}, "codex"),
        ({"type": "file-history-snapshot", "snapshot": {}}, "claude-code"),
        ({"type": "user", "sessionId": "s"}, "claude-code"),
    ],
)
def test_the_format_is_told_from_the_first_line(tmp_path: Path, first: dict[str, Any], found: str) -> None:
    assert detect_format(write(tmp_path / "f.jsonl", [first])) == found


def test_an_empty_or_unknown_file_is_one_bad_line(tmp_path: Path) -> None:
    (empty,) = list(read_conversations(write(tmp_path / "empty.jsonl", [])))
    assert isinstance(empty, BadLine) and empty.line == 0 and "cannot tell its format" in empty.reason
    (named,) = list(read_conversations(tmp_path / "empty.jsonl", "yaml"))
    assert isinstance(named, BadLine)
    assert named.reason == "unknown format 'yaml'; use one of openai, claude-code, codex, pi"
