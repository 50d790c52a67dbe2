"""The one assembler of an exchange's answer: the assistant's final message (text, thinking, tool calls), its finish
reason, model and token usage, from a buffered JSON body or from a recorded SSE stream, for chat completions,
messages and responses alike.

Runs once, when the store's writer records an exchange (and once over records stored before answers were kept);
`reef show`, the TUI and every other reader use the stored result. A stream is first rebuilt into the body a
non-streaming call would have returned, then read by the same rules as one. A cut stream gives whatever arrived.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from reef_contract import CHAT_ROUTE, MESSAGES_ROUTE, RESPONSES_ROUTE, Answer, AnswerPart, Usage
from reef_daemon.jsoncodec import loads_lenient, may_hold_a_long_integer
from reef_daemon.records.frames import frame_data, plain_events, split_frames
from reef_daemon.records.text_runs import run_events

_RESPONSES_TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def assemble(route: str, body: bytes, *, stream: bool) -> Answer | None:
    """The answer in `body` (a JSON answer, or with `stream` the SSE text of one) of an exchange on `route`.

    None when the route has no assistant message (count_tokens) or the body holds nothing of one.
    """
    if route not in (CHAT_ROUTE, MESSAGES_ROUTE, RESPONSES_ROUTE):
        return None
    if stream:
        events = _events(route, body)
        if not events:
            return None
        rebuilt = {CHAT_ROUTE: _chat_stream, MESSAGES_ROUTE: _messages_stream, RESPONSES_ROUTE: _responses_stream}
        answer = rebuilt[route](events)
    else:
        answer = json_object(body)
        if not answer:
            return None
    read = {CHAT_ROUTE: _from_chat, MESSAGES_ROUTE: _from_message, RESPONSES_ROUTE: _from_response}
    return read[route](answer)


# --- streams rebuilt into the non-streaming body -----------------------------------------------------------------


def _events(route: str, body: bytes) -> list[dict[str, Any]]:
    """The JSON payloads of a stream's frames, in order; `[DONE]`, comments and broken frames left out (a run of
    frames that differ only in their text is read as one frame holding the run's text)."""
    events = run_events(route, body)
    if events is not None:
        return events
    # One look for a long integer over the whole stream rather than one per frame: where there is none (nearly
    # always), no frame has one, and each is read by orjson at once.
    exact = may_hold_a_long_integer(body)
    if not exact:
        events = plain_events(body)
        if events is not None:
            return events
    events = []
    for frame in split_frames(body):
        data = frame_data(frame)
        if data == b"[DONE]":
            continue
        payload = json_object(data) if exact else _fast_object(data)
        if payload:
            events.append(payload)
    return events


def _fast_object(raw: bytes) -> dict[str, Any]:
    """`json_object` for a frame known to hold no integer orjson could misread."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json_object(raw)  # what orjson refuses (NaN, …), the standard library may still read
    return value if isinstance(value, dict) else {}


def _chat_stream(events: list[dict[str, Any]]) -> dict[str, Any]:
    answer: dict[str, Any] = {}
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish_reason = None
    for event in events:
        model = event.get("model")
        if model:
            answer["model"] = model
        usage = event.get("usage")
        if usage:
            answer["usage"] = usage
        choices = event.get("choices")
        if not isinstance(choices, list):
            continue
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            finish_reason = choice.get("finish_reason") or finish_reason
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            text = delta.get("content")
            if isinstance(text, str):
                content.append(text)
            if "reasoning_content" in delta:
                thought = delta["reasoning_content"]
            elif "reasoning" in delta:
                thought = delta["reasoning"]
            else:
                thought = None
            if isinstance(thought, str):
                reasoning.append(thought)
            if "tool_calls" in delta:
                _add_tool_calls(calls, delta["tool_calls"])
    message = {
        "role": "assistant",
        "content": "".join(content),
        "reasoning_content": "".join(reasoning),
        "tool_calls": [calls[index] for index in sorted(calls)],
    }
    answer["choices"] = [{"index": 0, "message": message, "finish_reason": finish_reason}]
    return answer


def _add_tool_calls(calls: dict[int, dict[str, Any]], deltas: Any) -> None:
    """A chat stream's tool-call deltas joined into `calls` by index."""
    for call in map(_dict, _list(deltas)):
        slot = calls.setdefault(_index(call), {"id": None, "function": {"name": "", "arguments": ""}})
        slot["id"] = call.get("id") or slot["id"]
        function = _dict(call.get("function"))
        slot["function"]["name"] += str(function.get("name") or "")
        slot["function"]["arguments"] += str(function.get("arguments") or "")


def _messages_stream(events: list[dict[str, Any]]) -> dict[str, Any]:
    answer: dict[str, Any] = {}
    usage: dict[str, Any] = {}
    blocks: dict[int, dict[str, Any]] = {}
    partial_json: dict[int, str] = {}
    for event in events:
        kind = event.get("type")
        index = _index(event)
        if kind == "message_start":
            message = _dict(event.get("message"))
            answer.update({key: value for key, value in message.items() if key not in ("content", "usage")})
            usage.update(_dict(message.get("usage")))
        elif kind == "content_block_start":
            blocks[index] = dict(_dict(event.get("content_block")))
        elif kind == "content_block_delta":
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            delta = _dict(event.get("delta"))
            if delta.get("type") == "text_delta":
                block["text"] = str(block.get("text", "")) + str(delta.get("text", ""))
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = str(block.get("thinking", "")) + str(delta.get("thinking", ""))
            elif delta.get("type") == "input_json_delta":
                partial_json[index] = partial_json.get(index, "") + str(delta.get("partial_json", ""))
        elif kind == "message_delta":
            answer.update(_dict(event.get("delta")))
            # Later counts are cumulative: they replace the ones message_start gave.
            usage.update({key: value for key, value in _dict(event.get("usage")).items() if value is not None})
    for index, text in partial_json.items():
        blocks[index]["input"] = text  # the JSON text as written, complete or not
    answer["content"] = [blocks[index] for index in sorted(blocks)]
    answer["usage"] = usage
    return answer


def _responses_stream(events: list[dict[str, Any]]) -> dict[str, Any]:
    answer: dict[str, Any] = {}
    items: dict[int, dict[str, Any]] = {}
    done: set[int] = set()
    written: dict[int, str] = {}  # text, arguments or reasoning summary streamed into an item not done yet
    for event in events:
        kind = event.get("type")
        response = event.get("response")
        if isinstance(response, dict):
            answer.update({key: value for key, value in response.items() if value is not None})
            if kind in _RESPONSES_TERMINAL and response.get("output"):
                return response  # the terminal event carries the whole answer
        index = _index(event, "output_index")
        if kind in ("response.output_item.added", "response.output_item.done"):
            items[index] = dict(_dict(event.get("item")))
            if kind == "response.output_item.done":
                done.add(index)
        elif kind in (
            "response.output_text.delta",
            "response.function_call_arguments.delta",
            "response.reasoning_summary_text.delta",
        ):
            written[index] = written.get(index, "") + str(event.get("delta", ""))
    for index, text in written.items():
        if index in done:
            continue
        item = items.setdefault(index, {"type": "message", "role": "assistant"})
        if item.get("type") == "function_call":
            item["arguments"] = text
        elif item.get("type") == "reasoning":
            item["summary"] = [{"type": "summary_text", "text": text}]
        else:
            item["content"] = [{"type": "output_text", "text": text}]
    answer["output"] = [items[index] for index in sorted(items)]
    return answer


# --- each API's answer read into one shape ------------------------------------------------------------------------


def _from_chat(completion: dict[str, Any]) -> Answer:
    choices = completion.get("choices")
    choice = _dict(choices[0]) if isinstance(choices, list) and choices else {}
    message = _dict(choice.get("message"))
    parts: list[AnswerPart] = []
    thought = message.get("reasoning_content", message.get("reasoning"))
    if isinstance(thought, str) and thought:
        parts.append({"type": "thinking", "text": thought})
    content = message.get("content")
    if isinstance(content, str) and content:
        parts.append({"type": "text", "text": content})
    for call in map(_dict, _list(message.get("tool_calls"))):
        function = _dict(call.get("function"))
        parts.append(_tool_call(call.get("id"), function.get("name"), function.get("arguments")))
    return _answer(completion, parts, choice.get("finish_reason"), "prompt_tokens", "completion_tokens")


def _from_message(message: dict[str, Any]) -> Answer:
    parts: list[AnswerPart] = []
    for block in map(_dict, _list(message.get("content"))):
        kind = str(block.get("type"))
        if kind == "text" and block.get("text"):
            parts.append({"type": "text", "text": str(block["text"])})
        elif kind == "thinking":
            parts.append({"type": "thinking", "text": str(block.get("thinking") or "")})
        elif kind in ("tool_use", "server_tool_use"):
            parts.append(_tool_call(block.get("id"), block.get("name"), block.get("input")))
        else:
            parts.append({"type": "other", "kind": kind})
    return _answer(message, parts, message.get("stop_reason"), "input_tokens", "output_tokens")


def _from_response(response: dict[str, Any]) -> Answer:
    parts: list[AnswerPart] = []
    for item in map(_dict, _list(response.get("output"))):
        kind = str(item.get("type", "message"))
        if kind == "message":
            for piece in map(_dict, _list(item.get("content"))):
                text = piece.get("text", piece.get("refusal"))
                if isinstance(text, str) and text:
                    parts.append({"type": "text", "text": text})
        elif kind == "reasoning":
            summary = [_dict(s).get("text", "") for s in _list(item.get("summary"))]
            parts.append({"type": "thinking", "text": " ".join(str(text) for text in summary)})
        elif kind in ("function_call", "custom_tool_call"):
            arguments = item.get("arguments", item.get("input"))
            parts.append(_tool_call(item.get("call_id"), item.get("name"), arguments))
        else:
            parts.append({"type": "other", "kind": kind})
    incomplete = response.get("incomplete_details")
    reason = incomplete.get("reason") if isinstance(incomplete, dict) else None
    return _answer(response, parts, reason or response.get("status"), "input_tokens", "output_tokens")


def _tool_call(call_id: Any, name: Any, arguments: Any) -> AnswerPart:
    return {
        "type": "tool_call",
        "id": call_id if isinstance(call_id, str) else None,
        "name": name if isinstance(name, str) and name else None,
        "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False),
    }


def _answer(body: dict[str, Any], parts: list[AnswerPart], finish: Any, inputs: str, outputs: str) -> Answer:
    """The answer's parts with the model, finish reason and usage `body` names (`inputs`/`outputs` its usage keys)."""
    usage = _dict(body.get("usage"))
    counted: Usage = {"input_tokens": _count(usage.get(inputs)), "output_tokens": _count(usage.get(outputs))}
    model = body.get("model")
    return {
        "model": model if isinstance(model, str) else None,
        "parts": parts,
        "finish_reason": finish if isinstance(finish, str) else None,
        "usage": counted,
    }


# A provider's odd answer must not stop its exchange from being recorded: shapes are checked, never assumed.
def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _index(event: dict[str, Any], key: str = "index") -> int:
    value = event.get(key)
    return value if isinstance(value, int) else 0


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def json_object(raw: bytes) -> dict[str, Any]:
    """`raw` as a JSON object; empty when it is not one."""
    try:
        value = loads_lenient(raw)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}
