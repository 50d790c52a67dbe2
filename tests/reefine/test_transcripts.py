"""What the step keeps of an agent's session log: pi's entries and codex's rollout items become a readable
transcript and a list of tool calls (codex's apply_patch edits too); the rest of a log is left out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from recipes.reefine.transcripts import tool_calls, transcript

PI = [
    {"type": "session", "version": 3, "cwd": "/w"},
    {"type": "message", "message": {"role": "user", "content": [{"type": "text", "text": "Make answers brief."}]}},
    {"type": "message", "message": {"role": "assistant", "content": [
        {"type": "toolCall", "id": "c0", "name": "bash", "arguments": {"command": "harness-check"}}]}},
    {"type": "message", "message": {"role": "toolResult", "toolCallId": "c0", "content": [
        {"type": "text", "text": "refused: entry id 'x!' is not allowed"}]}},
    {"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": "Done."}]}},
]  # fmt: skip
CODEX = [
    {"type": "turn_context", "payload": {"cwd": "/w", "approval_policy": "never"}},
    {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "Make answers brief."}]}},
    {"type": "response_item", "payload": {"type": "function_call", "name": "exec_command",
                                          "arguments": "{\"cmd\": \"harness-check\"}", "call_id": "c0"}},
    {"type": "event_msg", "payload": {"type": "token_count", "info": {"total_tokens": 15}}},
    {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c0",
                                          "output": "refused: entry id 'x!' is not allowed"}},
    {"type": "response_item", "payload": {"type": "custom_tool_call", "name": "apply_patch",
                                          "input": "*** Begin Patch\n*** Add File: skills/brief.md"}},
    {"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": "Done."}]}},
]  # fmt: skip


def log(folder: Path, lines: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True)
    (folder / "session.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


def test_a_pi_session_reads_as_its_messages_calls_and_results(tmp_path: Path) -> None:
    folder = log(tmp_path / "pi", PI)
    assert transcript(folder, 10_000) == (
        "[user] Make answers brief.\n\n"
        '[tool call] bash {"command": "harness-check"}\n\n'
        "[tool result] refused: entry id 'x!' is not allowed\n\n"
        "[assistant] Done."
    )
    assert tool_calls(folder) == ['bash {"command": "harness-check"}']


def test_a_codex_rollout_reads_the_same_way_without_its_settings_and_token_counts(tmp_path: Path) -> None:
    folder = log(tmp_path / "codex", CODEX)
    assert transcript(folder, 10_000) == (
        "[user] Make answers brief.\n\n"
        '[tool call] exec_command {"cmd": "harness-check"}\n\n'
        "[tool result] refused: entry id 'x!' is not allowed\n\n"
        "[tool call] apply_patch *** Begin Patch\n*** Add File: skills/brief.md\n\n"
        "[assistant] Done."
    )
    assert tool_calls(folder) == [
        'exec_command {"cmd": "harness-check"}',
        "apply_patch *** Begin Patch *** Add File: skills/brief.md",
    ]
    assert transcript(folder, 17) == "[assistant] Done."  # the end, bounded


def test_a_log_in_another_shape_is_kept_as_its_raw_end(tmp_path: Path) -> None:
    folder = log(tmp_path / "other", [{"kind": "note", "text": "hello"}])
    assert transcript(folder, 10_000) == '{"kind": "note", "text": "hello"}\n'
