"""The SSE relay forwards frames byte for byte however the upstream splits them, holds back only the terminal
frame, and stamps the receipt into it."""

from __future__ import annotations

import json
import random

import pytest

from reef_daemon.proxy.sse import SseRelay
from reef_daemon.records import parse_frame

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


def relay_in_pieces(route: str, body: bytes, seed: int, largest: int = 40) -> tuple[bytes, SseRelay]:
    """Feeds `body` to a relay in random pieces of 1 to `largest` bytes."""
    rng = random.Random(seed)
    relay, forwarded, position = SseRelay(route), b"", 0
    while position < len(body):
        size = rng.randint(1, largest)
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


def chat_frame(rng: random.Random) -> bytes:
    """One frame of a chat stream, with the traps a word search could fall into."""
    content = rng.choice(["a", "[DONE]", "chat.completion.chunk", "é\\n", ""])
    ident = rng.choice(["c1", "c2"])
    chunk = (
        b'data: {"id":"%s","object":"chat.completion.chunk","created":5,"model":"m","choices":[{"delta":'
        b'{"content":"%s"}}]}' % (ident.encode(), content.encode())
    )
    return rng.choice(
        [
            *[chunk] * 6,
            b'data: {"object":"chat.completion.chunk",',  # names a chunk but does not parse
            b"data: [DONE]",
            b"data:  [DONE] ",
            b"data: [DONE]x",
            b": [DONE] is only a comment",
            b"event: note\ndata: [DONE]",
            b'data: {"choices":[]}',
        ]
    )


def chat_stream(seed: int) -> bytes:
    rng = random.Random(seed)
    frames = [chat_frame(rng) for _ in range(rng.randint(0, 12))]
    runs = rng.random() < 0.25  # blank lines beyond the delimiter's in a quarter of the streams
    delimiters = [rng.choice([b"\n\n", b"\n\n\n", b"\n\n\n\n"]) if runs else b"\n\n" for _ in frames]
    body = b"".join(frame + delimiter for frame, delimiter in zip(frames, delimiters, strict=True))
    return body + rng.choice([b"", b"data: {", b"\n"])


def expected_chat_relay(body: bytes) -> tuple[bytes, bytes | None, dict[str, object] | None]:
    """What the relay must make of a whole chat stream, frame by frame: what it forwards before the terminal frame,
    the terminal frame, and the identity of the first chunk that parses."""
    start, identity = 0, None
    while (end := body.find(b"\n\n", start)) >= 0:
        data = parse_frame(body[start:end])[1]
        if identity is None and b"chat.completion.chunk" in body[start:end]:
            try:
                payload = json.loads(data)
            except ValueError:
                payload = None
            if isinstance(payload, dict):
                identity = {key: payload[key] for key in ("id", "created", "model") if key in payload}
        if data.strip() == "[DONE]":
            return body[:start], body[start : end + 2], identity
        start = end + 2
    return body[:start], None, identity


@pytest.mark.parametrize("seed", range(200))
@pytest.mark.parametrize("largest", [40, 4000])  # a few bytes at a time, or several frames in one read
def test_chat_relay_finds_the_terminal_and_identity_of_any_stream(seed: int, largest: int) -> None:
    body = chat_stream(seed)
    forwarded, relay = relay_in_pieces("/v1/chat/completions", body, seed, largest)
    before, terminal, identity = expected_chat_relay(body)
    assert relay.terminated == (terminal is not None)
    if terminal is None:
        assert forwarded + relay.remainder() == body
        return
    assert forwarded == before
    ending = relay.finish("f" * 32)
    receipt_frame, _, rest = ending.partition(b"\n\n")
    stamped = json.loads(receipt_frame.removeprefix(b"data: "))
    assert stamped == {"object": "chat.completion.chunk", **(identity or {}), "choices": [], "reef": stamped["reef"]}
    assert rest == body[len(before) :]  # the terminal frame and all that followed it, unchanged
