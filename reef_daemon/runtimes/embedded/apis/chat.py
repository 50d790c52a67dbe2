"""OpenAI chat completions: `POST /v1/chat/completions`."""

from __future__ import annotations

from typing import Any

from reef_daemon.errors import BadRequest
from reef_daemon.runtimes.embedded.apis.base import (
    Answer,
    GenerationRequest,
    Renderer,
    dump,
    message_list,
    new_id,
    role_of,
    sampling,
    seed,
    stop_sequences,
    stream_flag,
)
from reef_daemon.runtimes.embedded.sampling import SamplingDefaults, SamplingParams
from reef_daemon.runtimes.embedded.templating import ChatTurn, flatten_content, merge_turns, tool_call_text

_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "user"}


def parse(payload: dict[str, Any], defaults: SamplingDefaults) -> GenerationRequest:
    if payload.get("n") not in (None, 1):
        raise BadRequest("n must be 1: the embedded model gives one choice per request")
    turns = [_turn(message, f"messages[{i}]") for i, message in enumerate(message_list(payload, "messages"))]
    params = sampling(
        payload,
        defaults,
        ("max_completion_tokens", "max_tokens"),
        stop=stop_sequences(payload.get("stop"), "stop", defaults),
        seed=seed(payload),
    )
    return GenerationRequest(merge_turns(turns), params, stream_flag(payload))


def _turn(message: dict[str, Any], where: str) -> ChatTurn:
    role = role_of(message.get("role"), _ROLES, where)
    text = flatten_content(message.get("content"), f"{where}.content")
    if message.get("role") == "tool":
        text = f"[tool result] {text}"
    calls = message.get("tool_calls") or []
    if isinstance(calls, list):
        for index, call in enumerate(calls):
            function = call.get("function", {}) if isinstance(call, dict) else {}
            if not isinstance(function, dict):
                raise BadRequest(f"{where}.tool_calls[{index}].function must be an object")
            text = "\n".join(filter(None, [text, tool_call_text(function.get("name"), function.get("arguments"))]))
    return ChatTurn(role, text)


def error_body(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}


def _finish_reason(answer: Answer) -> str:
    return "length" if answer.finished.reason == "length" else "stop"


class ChatRenderer(Renderer):
    """A `chat.completion` object, or `chat.completion.chunk` frames ending in `data: [DONE]`."""

    def __init__(self, model: str, payload: dict[str, Any], params: SamplingParams, input_tokens: int) -> None:
        super().__init__(model, payload, params, input_tokens)
        self.id = new_id("chatcmpl-")
        options = payload.get("stream_options")
        self.include_usage = isinstance(options, dict) and options.get("include_usage") is True

    def _usage(self, answer: Answer) -> dict[str, int]:
        return {
            "prompt_tokens": answer.input_tokens,
            "completion_tokens": answer.output_tokens,
            "total_tokens": answer.input_tokens + answer.output_tokens,
        }

    def body(self, answer: Answer) -> dict[str, Any]:
        message = {"role": "assistant", "content": answer.text, "refusal": None}
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(answer)}],
            "usage": self._usage(answer),
        }

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> bytes:
        chunk = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
            **extra,
        }
        return f"data: {dump(chunk)}\n\n".encode()

    def start(self) -> bytes:
        delta = {"role": "assistant", "content": ""}
        return self._chunk([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}])

    def delta(self, text: str) -> bytes:
        return self._chunk([{"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}])

    def end(self, answer: Answer) -> bytes:
        frames = self._chunk([{"index": 0, "delta": {}, "logprobs": None, "finish_reason": _finish_reason(answer)}])
        if self.include_usage:
            frames += self._chunk([], usage=self._usage(answer))
        return frames + b"data: [DONE]\n\n"
