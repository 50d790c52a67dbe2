"""The SSE relay forwards frames byte for byte however the upstream splits them, holds back only the terminal
frame, and stamps the receipt into it; a chat stream whose usage reef asked for reaches the client as it would have
without the option."""

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


def relay_in_pieces(
    route: str, body: bytes, seed: int, largest: int = 40, *, hide_usage: bool = False
) -> tuple[bytes, SseRelay]:
    """Feeds `body` to a relay in random pieces of 1 to `largest` bytes."""
    rng = random.Random(seed)
    relay, forwarded, position = SseRelay(route, hide_usage=hide_usage), b"", 0
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
            b'data: {"choices":[],"usage":{"prompt_tokens":1}}',  # usage only: hidden where reef asked for it
            b'data: {"choices":[{"delta":{"content":"\\"usage\\": {"}}],"usage" : {"x":1}}',  # usage with choices
        ]
    )


def chat_stream(seed: int) -> bytes:
    rng = random.Random(seed)
    frames = [chat_frame(rng) for _ in range(rng.randint(0, 12))]
    runs = rng.random() < 0.25  # blank lines beyond the delimiter's in a quarter of the streams
    delimiters = [rng.choice([b"\n\n", b"\n\n\n", b"\n\n\n\n"]) if runs else b"\n\n" for _ in frames]
    body = b"".join(frame + delimiter for frame, delimiter in zip(frames, delimiters, strict=True))
    return body + rng.choice([b"", b"data: {", b"\n"])


def usage_only(data: str) -> bool:
    try:
        payload = json.loads(data)
    except ValueError:
        return False
    return isinstance(payload, dict) and payload.get("choices") == [] and isinstance(payload.get("usage"), dict)


def expected_chat_relay(body: bytes, hide_usage: bool) -> tuple[bytes, int, bytes | None, dict[str, object] | None]:
    """What the relay must make of a whole chat stream, frame by frame: what it forwards before the terminal frame
    (without usage-only chunks where it hides them), where the terminal frame starts, the terminal frame, and the
    identity of the first chunk that parses."""
    start, identity, forwarded = 0, None, b""
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
            return forwarded, start, body[start : end + 2], identity
        if not (hide_usage and usage_only(data)):
            forwarded += body[start : end + 2]
        start = end + 2
    return forwarded, start, None, identity


@pytest.mark.parametrize("seed", range(200))
@pytest.mark.parametrize("largest", [40, 4000])  # a few bytes at a time, or several frames in one read
@pytest.mark.parametrize("hide_usage", [False, True])
def test_chat_relay_finds_the_terminal_and_identity_of_any_stream(seed: int, largest: int, hide_usage: bool) -> None:
    body = chat_stream(seed)
    forwarded, relay = relay_in_pieces("/v1/chat/completions", body, seed, largest, hide_usage=hide_usage)
    before, terminal_at, terminal, identity = expected_chat_relay(body, hide_usage)
    assert relay.terminated == (terminal is not None)
    if terminal is None:
        assert forwarded + relay.remainder() == before + body[terminal_at:]
        return
    assert forwarded == before
    ending = relay.finish("f" * 32)
    receipt_frame, _, rest = ending.partition(b"\n\n")
    stamped = json.loads(receipt_frame.removeprefix(b"data: "))
    assert stamped == {"object": "chat.completion.chunk", **(identity or {}), "choices": [], "reef": stamped["reef"]}
    assert rest == body[terminal_at:]  # the terminal frame and all that followed it, unchanged


def openai_stream(usage_asked: bool, spaced: bool) -> bytes:
    """A chat stream as OpenAI sends it: with `include_usage`, `usage: null` in each chunk and a usage-only chunk
    before `[DONE]`; compact JSON, or with spaces after its separators as Python's json writes it."""
    head: dict[str, object] = {"id": "c1", "object": "chat.completion.chunk", "created": 5, "model": "m"}
    chunks = [{**head, "choices": [{"index": 0, "delta": {"content": text}}]} for text in ("a", '"usage":{', "b")]
    if usage_asked:
        chunks = [{**chunk, "usage": None} for chunk in chunks]
        chunks.append({**head, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})
    separators = (", ", ": ") if spaced else (",", ":")
    frames = [b"data: " + json.dumps(chunk, separators=separators).encode() + b"\n\n" for chunk in chunks]
    return b"".join(frames) + b"data: [DONE]\n\n"


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
@pytest.mark.parametrize("spaced", [False, True])
def test_a_usage_reef_asked_for_is_not_relayed(seed: int, newline: bytes, spaced: bool) -> None:
    asked = openai_stream(usage_asked=True, spaced=spaced).replace(b"\n", newline)
    plain = openai_stream(usage_asked=False, spaced=spaced).replace(b"\n", newline)
    forwarded, relay = relay_in_pieces("/v1/chat/completions", asked, seed, hide_usage=True)
    terminal = b"data: [DONE]" + newline * 2
    assert forwarded == plain[: -len(terminal)]  # what the upstream sends a client that did not ask
    receipt_frame, done = relay.finish("f" * 32).split(b"\n\n", 1)
    assert json.loads(receipt_frame.removeprefix(b"data: "))["reef"] == {"agent_record_id": "f" * 32}
    assert done == terminal


@pytest.mark.parametrize("seed", range(5))
def test_a_usage_the_client_asked_for_is_relayed(seed: int) -> None:
    asked = openai_stream(usage_asked=True, spaced=False)
    forwarded, relay = relay_in_pieces("/v1/chat/completions", asked, seed)
    assert forwarded == asked.removesuffix(b"data: [DONE]\n\n") and relay.terminated
