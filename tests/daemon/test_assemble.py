"""The one answer assembler: text, tool calls, finish reason and usage of chat completions, messages and responses,
streamed and not, read into the same shape; a stream's usage when it reports one, None when it does not."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reef_contract import Answer
from reef_daemon.records import assemble

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
RESPONSES = "/v1/responses"
ARGUMENTS = '{"city": "Paris"}'
CALL = {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": ARGUMENTS}
NOT_REPORTED = {"input_tokens": None, "output_tokens": None}


def sse(*payloads: dict[str, Any], named: bool = False, done: bool = False) -> bytes:
    """A stream's bytes; `named` frames carry `event: <type>` as messages and responses streams do."""
    frames = [(f"event: {p['type']}\n" if named else "") + f"data: {json.dumps(p)}\n\n" for p in payloads]
    return ("".join(frames) + ("data: [DONE]\n\n" if done else "")).encode()


def answer(parts: list[Any], finish: str | None, inputs: int | None, outputs: int | None) -> Answer:
    return {
        "model": "m",
        "parts": parts,
        "finish_reason": finish,
        "usage": {"input_tokens": inputs, "output_tokens": outputs},
    }


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


def test_chat_stream_with_usage_assembles_text_and_counts() -> None:
    body = sse(
        chunk({"role": "assistant"}),
        chunk({"content": "Hello"}),
        chunk({"content": ", world"}),
        chunk({}, "stop"),
        {"model": "m", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3}},  # include_usage
        done=True,
    )
    assert assemble(CHAT, body, stream=True) == answer([{"type": "text", "text": "Hello, world"}], "stop", 9, 3)


def test_chat_stream_without_usage_says_none_were_reported() -> None:
    body = sse(chunk({"content": "Hi"}), chunk({}, "stop"), done=True)
    assembled = assemble(CHAT, body, stream=True)
    assert assembled is not None and assembled["usage"] == NOT_REPORTED


def test_chat_stream_joins_tool_call_arguments_by_index() -> None:
    body = sse(
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "get_weather", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "Paris"}'}}]}),
        chunk({}, "tool_calls", usage={"prompt_tokens": 30, "completion_tokens": 9}),
        done=True,
    )
    assert assemble(CHAT, body, stream=True) == answer([CALL], "tool_calls", 30, 9)


def test_chat_buffered_reads_text_and_tool_calls() -> None:
    message = {
        "role": "assistant",
        "content": "Looking it up.",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ARGUMENTS}}
        ],
    }
    body = {
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39},
    }
    expected = answer([{"type": "text", "text": "Looking it up."}, CALL], "tool_calls", 30, 9)
    assert assemble(CHAT, json.dumps(body).encode(), stream=False) == expected


def test_messages_stream_assembles_blocks_and_counts_from_start_and_delta() -> None:
    def block_delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": index, "delta": delta}

    body = sse(
        {"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 25, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
        block_delta(0, {"type": "thinking_delta", "thinking": "Weather needs a tool."}),
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        block_delta(1, {"type": "text_delta", "text": "Let me check."}),
        {"type": "content_block_start", "index": 2,
         "content_block": {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {}}},
        block_delta(2, {"type": "input_json_delta", "partial_json": '{"city":'}),
        block_delta(2, {"type": "input_json_delta", "partial_json": ' "Paris"}'}),
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 40}},
        {"type": "message_stop"},
        named=True,
    )  # fmt: skip
    parts = [{"type": "thinking", "text": "Weather needs a tool."}, {"type": "text", "text": "Let me check."}, CALL]
    assert assemble(MESSAGES, body, stream=True) == answer(parts, "tool_use", 25, 40)


def test_messages_buffered_reads_text_and_tool_use() -> None:
    body = {
        "model": "m",
        "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 25, "output_tokens": 40},
    }
    expected = answer([{"type": "text", "text": "Let me check."}, CALL], "tool_use", 25, 40)
    assert assemble(MESSAGES, json.dumps(body).encode(), stream=False) == expected


def test_messages_stream_cut_midway_keeps_what_arrived() -> None:
    body = sse(
        {"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 25, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "The capital"}},
        named=True,
    )
    assert assemble(MESSAGES, body + b'event: content_block_delta\ndata: {"ty', stream=True) == answer(
        [{"type": "text", "text": "The capital"}], None, 25, 1
    )


RESPONSE_MESSAGE = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]}
RESPONSE_CALL = {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": ARGUMENTS}
RESPONSE_USAGE = {"input_tokens": 30, "output_tokens": 9, "total_tokens": 39}


def test_responses_stream_takes_the_answer_its_completed_event_carries() -> None:
    done = {"model": "m", "status": "completed", "output": [RESPONSE_MESSAGE, RESPONSE_CALL], "usage": RESPONSE_USAGE}
    body = sse(
        {"type": "response.created", "response": {**done, "status": "in_progress", "output": [], "usage": None}},
        {"type": "response.output_text.delta", "output_index": 0, "delta": "Checking."},
        {"type": "response.completed", "response": done},
        named=True,
    )
    expected = answer([{"type": "text", "text": "Checking."}, CALL], "completed", 30, 9)
    assert assemble(RESPONSES, body, stream=True) == expected


def test_responses_stream_without_a_terminal_event_assembles_its_deltas() -> None:
    started = {"model": "m", "status": "in_progress", "output": [], "usage": None}
    body = sse(
        {"type": "response.created", "response": started},
        {"type": "response.output_item.added", "output_index": 0, "item": {**RESPONSE_MESSAGE, "content": []}},
        {"type": "response.output_text.delta", "output_index": 0, "delta": "Check"},
        {"type": "response.output_text.delta", "output_index": 0, "delta": "ing."},
        {"type": "response.output_item.added", "output_index": 1, "item": {**RESPONSE_CALL, "arguments": ""}},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": '{"city":'},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": ' "Paris"}'},
        named=True,
    )
    expected = answer([{"type": "text", "text": "Checking."}, CALL], "in_progress", None, None)
    assert assemble(RESPONSES, body, stream=True) == expected


def test_responses_buffered_reads_items_and_the_incomplete_reason() -> None:
    body = {
        "model": "m",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [{"type": "reasoning", "summary": [{"type": "summary_text", "text": "Think."}]}, RESPONSE_MESSAGE],
        "usage": RESPONSE_USAGE,
    }
    parts = [{"type": "thinking", "text": "Think."}, {"type": "text", "text": "Checking."}]
    assert assemble(RESPONSES, json.dumps(body).encode(), stream=False) == answer(parts, "max_output_tokens", 30, 9)


@pytest.mark.parametrize(
    ("route", "body", "stream"),
    [
        ("/v1/messages/count_tokens", b'{"input_tokens": 12}', False),
        (CHAT, b"upstream said no", False),
        (MESSAGES, b"", True),
        (CHAT, b"data: [DONE]\n\n", True),
    ],
    ids=["count_tokens", "not-json", "empty-stream", "only-done"],
)
def test_no_answer_where_there_is_no_assistant_message(route: str, body: bytes, stream: bool) -> None:
    assert assemble(route, body, stream=stream) is None


@pytest.mark.parametrize(
    ("route", "body"),
    [
        (CHAT, sse({"choices": 5}, {"choices": ["x", {"delta": "x"}, {"delta": {"tool_calls": [1, {"index": [1]}]}}]})),
        (MESSAGES, sse({"type": "message_start", "message": 3}, {"type": "content_block_start", "index": "a"},
                       {"type": "content_block_delta", "index": None, "delta": {"type": "input_json_delta"}})),
        (RESPONSES, sse({"type": "response.output_item.added", "output_index": None, "item": "x"},
                        {"type": "response.completed", "response": {"output": [3, {"content": 4}]}})),
    ],
    ids=["chat", "messages", "responses"],
)  # fmt: skip
def test_odd_shapes_still_give_an_answer(route: str, body: bytes) -> None:
    """A provider's malformed answer must not stop its exchange from being recorded."""
    assembled = assemble(route, body, stream=True)
    assert assembled is not None and assembled["usage"] == NOT_REPORTED


def test_a_stream_with_an_integer_beyond_64_bits_keeps_it_exact() -> None:
    big = 2**64 + 1
    body = sse(chunk({"content": "a"}), chunk({"content": "b"}, "stop", usage={"prompt_tokens": big}), done=True)
    assembled = assemble(CHAT, body, stream=True)
    assert assembled is not None and assembled["usage"]["input_tokens"] == big


def test_a_stream_framed_with_carriage_returns_reads_as_one_framed_with_newlines() -> None:
    plain = sse(chunk({"content": "Hel"}), chunk({"content": "lo"}, "stop"), done=True)
    assert assemble(CHAT, plain.replace(b"\n", b"\r\n"), stream=True) == assemble(CHAT, plain, stream=True)
    assert assemble(CHAT, plain.replace(b"\n", b"\r"), stream=True) == assemble(CHAT, plain, stream=True)


def test_a_stream_frame_only_the_standard_library_reads_still_counts() -> None:
    """orjson refuses NaN; the frame is read as the standard library reads it, as before."""
    body = b'data: {"model": "m", "choices": [{"index": 0, "delta": {"content": "x"}}], "score": NaN}\n\n'
    assembled = assemble(CHAT, body, stream=True)
    assert assembled is not None and assembled["parts"] == [{"type": "text", "text": "x"}]


@pytest.mark.parametrize(
    ("tail", "text"),
    [
        (b'data: {"model": "m", "choi', "Hello"),  # cut inside a frame
        (b"data: [DONE]\n\ndata: " + json.dumps(chunk({"content": " again"})).encode() + b"\n\n", "Hello again"),
        (b'data: ["a list"]\n\ndata: {}\n\n: a comment\n\n', "Hello"),  # frames that are no event
        (b'data:{"model": "m", "choices": [{"delta": {"content": " tight"}}]}\n\n', "Hello tight"),
        (b"data: " + json.dumps(chunk({"content": " two"})).encode().replace(b", ", b",\ndata: ", 1) + b"\n\n",
         "Hello two"),
        (b"\n\n\ndata: " + json.dumps(chunk({"content": " gap"})).encode() + b"\n\n", "Hello gap"),
    ],
    ids=["cut", "done-midway", "not-events", "no-space", "two-lines", "blank-lines"],
)  # fmt: skip
def test_a_stream_of_any_framing_keeps_each_frame_that_arrived(tail: bytes, text: str) -> None:
    """Every frame is read on its own, whatever its neighbours: a broken one is left out, the rest kept."""
    assembled = assemble(CHAT, sse(chunk({"content": "Hel"}), chunk({"content": "lo"})) + tail, stream=True)
    assert assembled is not None
    assert "".join(part["text"] for part in assembled["parts"] if part["type"] == "text") == text
