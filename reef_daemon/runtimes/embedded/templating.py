"""Turning each API's conversation into plain chat turns, and the turns into prompt token ids.

Small chat templates (SmolLM2's among them) concatenate `content` as a string, so content given as a list of
parts is flattened to text here. Parts the model cannot take (images, files) become a short marker; tool calls
and tool results become text, because the model answers in text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from reef_daemon.errors import BadRequest

TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text", "refusal"})
IMAGE_PART_TYPES = frozenset({"image", "image_url", "input_image"})
FILE_PART_TYPES = frozenset({"file", "input_file", "document", "input_audio"})
SKIPPED_PART_TYPES = frozenset({"thinking", "redacted_thinking", "reasoning"})


@dataclass(frozen=True)
class ChatTurn:
    """One turn as the chat template sees it."""

    role: str  # system, user or assistant
    content: str


def flatten_content(content: Any, where: str) -> str:
    """A string, or a list of content parts, as one text; `where` names the field in errors."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        raise BadRequest(f"{where} must be a string or a list of content parts")
    texts = [text for text in (_part_text(part, f"{where}[{i}]") for i, part in enumerate(content)) if text]
    return "\n".join(texts)


def tool_call_text(name: Any, arguments: Any) -> str:
    """How an earlier tool call by the assistant reads in the transcript."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return f"[tool call] {name}({args})"


def tool_result_text(content: Any, where: str) -> str:
    """How a tool's result reads in the transcript."""
    return f"[tool result] {flatten_content(content, where)}"


def merge_turns(turns: Iterable[ChatTurn]) -> list[ChatTurn]:
    """Join consecutive turns of the same role (e.g. a tool call and its text), dropping empty ones."""
    merged: list[ChatTurn] = []
    for turn in turns:
        if not turn.content:
            continue
        if merged and merged[-1].role == turn.role:
            merged[-1] = ChatTurn(turn.role, f"{merged[-1].content}\n{turn.content}")
        else:
            merged.append(turn)
    return merged


def render_prompt(tokenizer: Any, turns: list[ChatTurn]) -> list[int]:
    """Prompt token ids from the model's chat template, ending where the assistant's answer begins."""
    if not turns or all(turn.role == "system" for turn in turns):
        raise BadRequest("the conversation needs at least one user or assistant message")
    messages = [{"role": turn.role, "content": turn.content} for turn in turns]
    encoded = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    ids = encoded["input_ids"] if hasattr(encoded, "keys") else encoded
    return [int(token) for token in ids]


def _part_text(part: Any, where: str) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        raise BadRequest(f"{where} must be a content part object")
    kind = part.get("type", "text")
    if kind in TEXT_PART_TYPES:
        text = part.get("text", part.get("refusal", ""))
        if not isinstance(text, str):
            raise BadRequest(f"{where}.text must be a string")
        return text
    if kind in IMAGE_PART_TYPES:
        return "[image]"
    if kind in FILE_PART_TYPES:
        return "[file]"
    if kind in SKIPPED_PART_TYPES:
        return ""
    if kind == "tool_use":
        return tool_call_text(part.get("name"), part.get("input", {}))
    if kind == "tool_result":
        return tool_result_text(part.get("content"), f"{where}.content")
    raise BadRequest(f"{where} has an unsupported content part type {kind!r}")
