"""Anthropic Messages: `POST /v1/messages` and `POST /v1/messages/count_tokens`."""

from __future__ import annotations

from typing import Any

from reef_daemon.errors import BadRequest
from reef_daemon.runtimes.embedded.apis.base import (
    Answer,
    GenerationRequest,
    Renderer,
    event_frame,
    message_list,
    new_id,
    sampling,
    stop_sequences,
    stream_flag,
)
from reef_daemon.runtimes.embedded.sampling import SamplingDefaults, SamplingParams
from reef_daemon.runtimes.embedded.templating import ChatTurn, flatten_content, merge_turns


def conversation(payload: dict[str, Any]) -> list[ChatTurn]:
    """The system prompt and messages as chat turns (also what `count_tokens` counts).

    A `system` turn inside `messages` (Claude Code sends one listing its agent types) is folded into the system
    prompt, in order: the chat template takes one system prompt, at the start.
    """
    system = [flatten_content(payload.get("system"), "system")]
    turns: list[ChatTurn] = []
    for index, message in enumerate(message_list(payload, "messages")):
        role = message.get("role")
        if role not in ("user", "assistant", "system"):
            raise BadRequest(f"messages[{index}].role must be user, assistant or system")
        content = flatten_content(message.get("content"), f"messages[{index}].content")
        if role == "system":
            system.append(content)
        else:
            turns.append(ChatTurn(role, content))
    return merge_turns([ChatTurn("system", "\n\n".join(part for part in system if part)), *turns])


def parse(payload: dict[str, Any], defaults: SamplingDefaults) -> GenerationRequest:
    params = sampling(
        payload,
        defaults,
        ("max_tokens",),
        stop=stop_sequences(payload.get("stop_sequences"), "stop_sequences", defaults),
    )
    return GenerationRequest(conversation(payload), params, stream_flag(payload))


def error_body(message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def _stop_reason(answer: Answer) -> str:
    if answer.finished.reason == "length":
        return "max_tokens"
    return "stop_sequence" if answer.finished.stop_sequence is not None else "end_turn"


class MessagesRenderer(Renderer):
    """A `message` object, or the event stream from `message_start` to `message_stop`."""

    def __init__(self, model: str, payload: dict[str, Any], params: SamplingParams, input_tokens: int) -> None:
        super().__init__(model, payload, params, input_tokens)
        self.id = new_id("msg_")

    def _message(self, content: list[dict[str, Any]], answer: Answer | None) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": _stop_reason(answer) if answer else None,
            "stop_sequence": answer.finished.stop_sequence if answer else None,
            "usage": {"input_tokens": self.input_tokens, "output_tokens": answer.output_tokens if answer else 0},
        }

    def body(self, answer: Answer) -> dict[str, Any]:
        return self._message([{"type": "text", "text": answer.text}], answer)

    def start(self) -> bytes:
        return (
            event_frame({"type": "message_start", "message": self._message([], None)})
            + event_frame({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
            + event_frame({"type": "ping"})
        )

    def delta(self, text: str) -> bytes:
        return event_frame({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})

    def end(self, answer: Answer) -> bytes:
        delta = {"stop_reason": _stop_reason(answer), "stop_sequence": answer.finished.stop_sequence}
        return (
            event_frame({"type": "content_block_stop", "index": 0})
            + event_frame({"type": "message_delta", "delta": delta, "usage": {"output_tokens": answer.output_tokens}})
            + event_frame({"type": "message_stop"})
        )
