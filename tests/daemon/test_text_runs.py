"""A chat stream's run of text frames is read as one frame when it is assembled, and the answer is the one its frames
give read one by one: the same text, model, finish reason and usage, whatever the frames hold (escapes, characters
or surrogate pairs split over two frames, other choices, reasoning, tool calls, long integers, broken frames, a
cut)."""

from __future__ import annotations

import importlib
import json
import random
from typing import Any

import pytest

from reef_daemon.records import assemble
from reef_daemon.records.text_runs import run_events

ASSEMBLER = importlib.import_module("reef_daemon.records.assemble")
CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
PIECES = ["a", "b ", " ", '"', "\\", "\n", "é", "Ω", "😀", "\u2028", "12345678901234567890123", "\ud83d", "\ude00"]


def frame_by_frame(route: str, body: bytes) -> Any:
    """The answer as the frames give it read one by one (the assembler with no run merged)."""
    unmerged = pytest.MonkeyPatch()
    unmerged.setattr(ASSEMBLER, "run_events", lambda route, body: None)
    try:
        return assemble(route, body, stream=True)
    finally:
        unmerged.undo()


def chat_chunk(content: str | None, **extra: Any) -> dict[str, Any]:
    delta: dict[str, Any] = {} if content is None else {"content": content}
    return {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": None}], **extra}


def sse(events: list[dict[str, Any]], *, ascii_only: bool = False, spaced: bool = False, done: bool = True) -> bytes:
    separators = (", ", ": ") if spaced else (",", ":")
    lines = [f"data: {json.dumps(e, separators=separators, ensure_ascii=ascii_only)}\n\n" for e in events]
    return ("".join(lines) + ("data: [DONE]\n\n" if done else "")).encode("utf-8", "surrogatepass")


def test_a_long_answer_streamed_a_token_a_frame_is_merged_and_assembles_whole() -> None:
    tokens = [f"word{i} " for i in range(200)] + ['say "hi"\\ ', "naïve ", "😀"]
    events = [chat_chunk(""), *(chat_chunk(t) for t in tokens)]
    events[-1]["choices"][0]["finish_reason"] = "stop"
    body = sse(events)
    assert len(run_events(CHAT, body) or []) == 2  # the run (the first frame is like the others), the last frame
    assembled = assemble(CHAT, body, stream=True)
    assert assembled is not None and assembled["parts"] == [{"type": "text", "text": "".join(tokens)}]
    assert assembled["finish_reason"] == "stop" and assembled["model"] == "m"
    assert assembled == frame_by_frame(CHAT, body)


@pytest.mark.parametrize("ascii_only", [False, True])
def test_a_character_split_over_two_frames_reads_as_each_frame_has_it(ascii_only: bool) -> None:
    halves = ["\ud83d", "\ude00"] if ascii_only else ["x", "y"]
    events = [chat_chunk("a"), chat_chunk("b"), chat_chunk(halves[0]), chat_chunk(halves[1]), chat_chunk("c")]
    body = sse(events, ascii_only=ascii_only)
    if not ascii_only:  # one UTF-8 character's bytes split over two frames
        body = body.replace(b'"x"', b'"\xf0\x9f"').replace(b'"y"', b'"\x98\x80"')
    assert assemble(CHAT, body, stream=True) == frame_by_frame(CHAT, body)


@pytest.mark.parametrize(
    "odd_one",
    [
        {"id": "c1", "model": "other", "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]},
        {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"content": "x", "reasoning_content": "r"}}]},
        {"id": "c1", "model": "m", "choices": [{"index": 1, "delta": {"content": "x"}, "finish_reason": None}]},
        {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0}]}}]},
        {"id": "c1", "model": "m", "choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}},
    ],
    ids=["another model", "reasoning", "another choice", "a tool call", "usage"],
)
def test_a_frame_unlike_the_run_keeps_its_part_in_the_answer(odd_one: dict[str, Any]) -> None:
    events = [chat_chunk(f"t{i} ") for i in range(8)]
    events.insert(4, odd_one)
    body = sse(events)
    assert assemble(CHAT, body, stream=True) == frame_by_frame(CHAT, body)


def test_a_run_whose_every_frame_has_the_same_reasoning_is_not_joined_into_one() -> None:
    events = [
        {"model": "m", "choices": [{"index": 0, "delta": {"content": f"t{i}", "reasoning": "same"}}]} for i in range(6)
    ]
    body = sse(events)
    assembled = assemble(CHAT, body, stream=True)
    assert assembled is not None and assembled["parts"][0] == {"type": "thinking", "text": "same" * 6}


def test_a_messages_stream_is_read_frame_by_frame() -> None:
    def named(event: dict[str, Any]) -> str:
        return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"

    texts = [f"part {i}, " for i in range(50)]
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 7, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}} for t in texts),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 50}},
        {"type": "message_stop"},
    ]
    body = "".join(named(e) for e in events).encode()
    assert run_events(MESSAGES, body) is None
    assembled = assemble(MESSAGES, body, stream=True)
    assert assembled is not None and assembled["parts"] == [{"type": "text", "text": "".join(texts)}]
    assert assembled["usage"] == {"input_tokens": 7, "output_tokens": 50}


def _random_chat_stream(draw: random.Random) -> bytes:
    """A chat stream that is usually one clean run, and now and then has frames unlike the others."""
    odd = draw.random() < 0.3
    events: list[dict[str, Any]] = []
    for _ in range(draw.randint(1, 14)):
        pieces = PIECES[:-2] if draw.random() < 0.9 else PIECES
        text = "".join(draw.choice(pieces) for _ in range(draw.randint(0, 5)))
        delta: dict[str, Any] = {"content": text}
        if odd and draw.random() < 0.15:
            delta = draw.choice([{}, {"reasoning": text}, {"content": text, "tool_calls": [{"index": 0}]}])
        choice = {"index": 1 if odd and draw.random() < 0.05 else 0, "delta": delta, "finish_reason": None}
        events.append({"id": "c1", "model": "other" if odd and draw.random() < 0.05 else "m", "choices": [choice]})
    events[-1]["choices"][0]["finish_reason"] = "stop"
    body = sse(events, ascii_only=draw.random() < 0.5, spaced=draw.random() < 0.3, done=draw.random() < 0.8)
    if odd and draw.random() < 0.3:
        body = body[: draw.randrange(len(body))]  # cut anywhere
    if odd and draw.random() < 0.2:
        at = draw.randrange(len(body))
        body = body[:at] + draw.choice([b"}", b'"', b"\\", b"\n\n", b"\xff"]) + body[at:]  # a broken frame
    return body


@pytest.mark.parametrize("seed", range(4))
def test_random_chat_streams_assemble_as_their_frames_read_one_by_one(seed: int) -> None:
    draw = random.Random(seed)
    merged = 0
    for _ in range(500):
        body = _random_chat_stream(draw)
        merged += run_events(CHAT, body) is not None
        assert assemble(CHAT, body, stream=True) == frame_by_frame(CHAT, body), body
    assert merged > 100  # most of them were one run


def test_a_count_too_long_for_a_machine_integer_is_read_exactly() -> None:
    events = [chat_chunk(f"t{i} ") for i in range(8)]
    events.append({"id": "c1", "model": "m", "choices": [], "usage": {"prompt_tokens": 10**25, "completion_tokens": 8}})
    assembled = assemble(CHAT, sse(events), stream=True)
    assert assembled is not None and assembled["usage"] == {"input_tokens": 10**25, "output_tokens": 8}


def test_texts_that_are_no_json_strings_on_their_own_read_as_the_broken_frames_they_are() -> None:
    # `x\` and `,"` in two frames: each frame is broken, though the two read together would make a string
    body = sse([chat_chunk(f"t{i}") for i in range(8)]).replace(b'"t3"', b'"x\\"').replace(b'"t4"', b'",""')
    assembled = assemble(CHAT, body, stream=True)
    assert assembled == frame_by_frame(CHAT, body)
    assert assembled is not None and assembled["parts"] == [{"type": "text", "text": "t0t1t2t5t6t7"}]
