"""OpenAI Responses: `POST /v1/responses` (what Codex speaks).

Input items the model cannot act on are read as text: function calls and their outputs become transcript
lines, reasoning items are skipped. The model calls no tools, so the response lists none.
"""

from __future__ import annotations

from typing import Any

from reef_daemon.errors import BadRequest
from reef_daemon.runtimes.embedded.apis.base import (
    Answer,
    GenerationRequest,
    Renderer,
    event_frame,
    new_id,
    role_of,
    sampling,
    stream_flag,
)
from reef_daemon.runtimes.embedded.sampling import SamplingDefaults, SamplingParams
from reef_daemon.runtimes.embedded.templating import (
    ChatTurn,
    flatten_content,
    merge_turns,
    tool_call_text,
    tool_result_text,
)

_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


def parse(payload: dict[str, Any], defaults: SamplingDefaults) -> GenerationRequest:
    turns = [ChatTurn("system", flatten_content(payload.get("instructions"), "instructions"))]
    items = payload.get("input")
    if isinstance(items, str):
        turns.append(ChatTurn("user", items))
    elif isinstance(items, list) and items:
        turns.extend(_item_turn(item, f"input[{i}]") for i, item in enumerate(items))
    else:
        raise BadRequest("input must be a string or a non-empty list of input items")
    params = sampling(payload, defaults, ("max_output_tokens",))
    return GenerationRequest(merge_turns(turns), params, stream_flag(payload))


def _item_turn(item: Any, where: str) -> ChatTurn:
    if not isinstance(item, dict):
        raise BadRequest(f"{where} must be an object")
    kind = item.get("type", "message")
    if kind == "message":
        role = role_of(item.get("role"), _ROLES, where)
        return ChatTurn(role, flatten_content(item.get("content"), f"{where}.content"))
    if isinstance(kind, str) and kind.endswith("_call_output"):
        return ChatTurn("user", tool_result_text(item.get("output"), f"{where}.output"))
    if isinstance(kind, str) and kind.endswith("_call"):
        arguments = item.get("arguments", item.get("input", item.get("action", {})))
        return ChatTurn("assistant", tool_call_text(item.get("name", kind), arguments))
    return ChatTurn("assistant", "")  # reasoning and other items carry nothing the model can read


def error_body(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}


class ResponsesRenderer(Renderer):
    """A `response` object, or the event stream from `response.created` to `response.completed`."""

    def __init__(self, model: str, payload: dict[str, Any], params: SamplingParams, input_tokens: int) -> None:
        super().__init__(model, payload, params, input_tokens)
        self.id = new_id("resp_")
        self.item_id = new_id("msg_")
        self.sequence = 0

    def _response(self, answer: Answer | None, output: list[dict[str, Any]]) -> dict[str, Any]:
        incomplete = answer is not None and answer.finished.reason == "length"
        status = "in_progress" if answer is None else "incomplete" if incomplete else "completed"
        usage = None
        if answer is not None:
            usage = {
                "input_tokens": answer.input_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": answer.output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": answer.input_tokens + answer.output_tokens,
            }
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "instructions": self.payload.get("instructions"),
            "max_output_tokens": self.params.max_tokens,
            "model": self.model,
            "output": output,
            "parallel_tool_calls": False,
            "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None},
            "store": False,
            "temperature": self.params.temperature,
            "text": {"format": {"type": "text"}},
            "tool_choice": "none",
            "tools": [],
            "top_p": self.params.top_p,
            "truncation": "disabled",
            "usage": usage,
            "metadata": {},
        }

    def _item(self, text: str | None) -> dict[str, Any]:
        done = text is not None
        return {
            "type": "message",
            "id": self.item_id,
            "status": "completed" if done else "in_progress",
            "role": "assistant",
            "content": [self._part(text)] if done else [],
        }

    @staticmethod
    def _part(text: str | None) -> dict[str, Any]:
        return {"type": "output_text", "text": text or "", "annotations": [], "logprobs": []}

    def _event(self, kind: str, **fields: Any) -> bytes:
        frame = event_frame({"type": kind, "sequence_number": self.sequence, **fields})
        self.sequence += 1
        return frame

    def body(self, answer: Answer) -> dict[str, Any]:
        return self._response(answer, [self._item(answer.text)])

    def start(self) -> bytes:
        where = {"item_id": self.item_id, "output_index": 0, "content_index": 0}
        return (
            self._event("response.created", response=self._response(None, []))
            + self._event("response.in_progress", response=self._response(None, []))
            + self._event("response.output_item.added", output_index=0, item=self._item(None))
            + self._event("response.content_part.added", **where, part=self._part(""))
        )

    def delta(self, text: str) -> bytes:
        return self._event(
            "response.output_text.delta", item_id=self.item_id, output_index=0, content_index=0, delta=text, logprobs=[]
        )

    def end(self, answer: Answer) -> bytes:
        where = {"item_id": self.item_id, "output_index": 0, "content_index": 0}
        item = self._item(answer.text)
        response = self._response(answer, [item])
        terminal = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
        return (
            self._event("response.output_text.done", **where, text=answer.text, logprobs=[])
            + self._event("response.content_part.done", **where, part=self._part(answer.text))
            + self._event("response.output_item.done", output_index=0, item=item)
            + self._event(terminal, response=response)
        )
