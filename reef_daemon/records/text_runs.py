"""A recorded chat stream's run of text frames, read as one frame when its answer is assembled.

A streamed chat answer is mostly frames that are byte for byte the same but for their `delta.content`. Reading
each of them as JSON is what assembling a stream costs; where consecutive frames are the same around their text,
the run reads as one frame holding their texts joined, and the answer assembled from it and the frames around it
is the one the whole stream gives. One frame from the middle of the stream names the bytes around a text; the
frames from the first to the last that have the same bytes there are the run, compared in one go. Whatever does
not fit exactly (a frame unlike the others inside the run, another choice, reasoning or tool calls in the frames,
a broken frame, a character split over two frames, frames with event lines as message streams send) is read
frame by frame as it came.
"""

from __future__ import annotations

import re
from operator import itemgetter
from typing import Any

import orjson

from reef_contract import CHAT_ROUTE
from reef_daemon.jsoncodec import may_hold_a_long_integer
from reef_daemon.records.frames import plain_frame_events, plain_frames

MIN_MERGED = 3  # frames a run must have to be read as one
_DELIMITER = b"\n\n"
# A JSON string's body as the grammar has it: no raw quote, backslash or control character but in an escape.
_ESCAPE_OR_CONTROL = re.compile(rb'["\\\x00-\x1f]')
_STRING_BODY = re.compile(rb'(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*')


# The member `"content": "…"` with its string's escaped text captured (a frame never holds a raw newline).
_CONTENT = re.compile(rb'"content"[ \t]*:[ \t]*"((?:[^"\\\n]|\\[^\n])*)"')


def _chat_text(event: dict[str, Any]) -> Any:
    """The content of the one choice a chat chunk adds to the answer, where it adds nothing else that a merge
    would change (reasoning and tool calls are joined too, so they must not be in the run's frames)."""
    choices = event.get("choices")
    firsts = [c for c in choices if isinstance(c, dict) and c.get("index", 0) == 0] if isinstance(choices, list) else []
    delta = firsts[0].get("delta") if len(firsts) == 1 else None
    if not isinstance(delta, dict) or {"reasoning_content", "reasoning", "tool_calls"} & delta.keys():
        return None
    return delta.get("content")


def run_events(route: str, body: bytes) -> list[dict[str, Any]] | None:
    """The events of a plain chat stream (`frames.plain_events`) with the run of frames around its middle that are
    the same but for their text read as one; None where there is no such run, or where a frame might hold an
    integer orjson does not read exactly."""
    frames = plain_frames(body) if route == CHAT_ROUTE else None
    if frames is None:
        return None
    middle = len(frames) // 2
    matches = [*_CONTENT.finditer(frames[middle])]
    if len(matches) != 1:
        return None
    head, tail = frames[middle][: matches[0].start(1)], frames[middle][matches[0].end(1) :]
    # The run: the frames from the first to the last that have the middle one's head and tail, every one of them
    # (a frame unlike the others inside the run leaves the whole stream to be read frame by frame).
    first, last = 0, len(frames)
    while first < middle and not _alike(frames[first], head, tail):
        first += 1
    while last > middle + 1 and not _alike(frames[last - 1], head, tail):
        last -= 1
    if last - first < MIN_MERGED:
        return None
    run = frames[first:last]
    texts = list(map(itemgetter(slice(len(head), -len(tail))), run))
    # Every frame of the run is its head, its text and its tail (compared in one go, not frame by frame).
    if _DELIMITER.join(run) != head + (tail + _DELIMITER + head).join(texts) + tail:
        return None
    text = _text(texts)
    if text is None:
        return None
    before, after = frames[:first], frames[last:]
    if may_hold_a_long_integer(_DELIMITER.join((*before, head, tail, *after))):  # (digits in a text are text)
        return None
    events = plain_frame_events([*before, head + b"".join(texts) + tail, *after])
    # Read frame for frame, the events are the frames' (the run's one where its first frame was).
    if events is None or len(events) <= first or _chat_text(events[first]) != text:
        return None
    return events


def _alike(frame: bytes, head: bytes, tail: bytes) -> bool:
    return frame.startswith(head) and frame.endswith(tail) and len(frame) >= len(head) + len(tail)


def _text(texts: list[bytes]) -> str | None:
    """The texts read as JSON string bodies and joined; None where one is not a string's body on its own (a
    character or a surrogate pair split over two frames reads differently joined)."""
    joined = b"".join(texts)
    if joined.isascii() and not _ESCAPE_OR_CONTROL.search(joined):
        return joined.decode("ascii")
    if not all(map(_STRING_BODY.fullmatch, texts)):
        return None
    try:
        return "".join(orjson.loads(b'["' + b'","'.join(texts) + b'"]'))
    except orjson.JSONDecodeError:
        return None
