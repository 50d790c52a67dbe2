"""The SSE relay forwards frames byte for byte however the upstream splits them, holds back only the terminal
frame, and stamps the receipt into it."""

from __future__ import annotations

import json
import random

import pytest

from reef_daemon.proxy.sse import SseRelay

CHAT = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":5,"model":"m","choices":[{"delta":{"content":"a"}}]}'
    b"\n\n"
    b'data: {"id":"c1","object":"chat.completion.chunk","created":5,"model":"m","choices":[{"delta":{"content":"b"}}]}'
    b"\n\ndata: [DONE]\n\n"
)
MESSAGES = (
    b'event: message_start\ndata: {"type":"message_start","message":{}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"text":"message_stop"}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def relay_in_pieces(route: str, body: bytes, seed: int) -> tuple[bytes, SseRelay]:
    rng = random.Random(seed)
    relay, forwarded, position = SseRelay(route), b"", 0
    while position < len(body):
        size = rng.randint(1, 40)
        forwarded += relay.feed(body[position : position + size])
        position += size
    return forwarded, relay


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
def test_chat_stream_split_anywhere(seed: int, newline: bytes) -> None:
    body = CHAT.replace(b"\n", newline)
    forwarded, relay = relay_in_pieces("/v1/chat/completions", body, seed)
    assert relay.terminated
    terminal = b"data: [DONE]" + newline * 2
    assert forwarded == body[: -len(terminal)]  # everything but the terminal frame, unchanged
    ending = relay.finish("f" * 32)
    receipt_frame, done = ending.split(b"\n\n", 1)
    stamped = json.loads(receipt_frame.removeprefix(b"data: "))
    assert stamped == {
        "object": "chat.completion.chunk",
        "id": "c1",
        "created": 5,
        "model": "m",
        "choices": [],
        "reef": {"agent_record_id": "f" * 32},
    }
    assert done == terminal


@pytest.mark.parametrize("seed", range(10))
def test_messages_terminal_is_the_message_stop_event_only(seed: int) -> None:
    forwarded, relay = relay_in_pieces("/v1/messages", MESSAGES, seed)
    assert relay.terminated
    assert b"message_start" in forwarded and b'"text":"message_stop"' in forwarded  # a delta quoting it is not it
    assert relay.finish("a" * 32) == (
        b'event: message_stop\ndata: {"type":"message_stop","reef":{"agent_record_id":"' + b"a" * 32 + b'"}}\n\n'
    )


def test_stream_without_terminal_keeps_its_remainder() -> None:
    relay = SseRelay("/v1/responses")
    forwarded = relay.feed(b'event: response.created\ndata: {"type":"response.created"}\n\nevent: x\ndata: {')
    assert forwarded.endswith(b"\n\n") and not relay.terminated
    assert relay.remainder() == b"event: x\ndata: {"
