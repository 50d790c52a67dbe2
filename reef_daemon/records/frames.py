"""Server-sent events as frames: a body split at its frame delimiters, a frame read as its event name and data.

The proxy's relay finds frames in a live stream with these rules; the assembler reads a recorded stream with them.
"""

from __future__ import annotations

import re
from operator import itemgetter, methodcaller
from typing import Any

import orjson

FRAME_DELIMITER = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_IS_DATA = methodcaller("startswith", b"data: ")
_DATA = itemgetter(slice(6, None))


def parse_frame(frame: bytes) -> tuple[str | None, str]:
    """(event name, data) of one SSE frame; data lines joined by newlines."""
    event: str | None = None
    data_lines: list[str] = []
    text = frame.decode("utf-8", errors="replace")
    # A frame of one line (nearly every frame) is not split: the regex costs more than the rest of the reading.
    for line in _LINE_BREAK.split(text) if "\n" in text or "\r" in text else (text,):
        if line.startswith("data:"):
            data_lines.append(line[5:].removeprefix(" "))
        elif line.startswith("event:"):
            event = line[6:].strip()
    return event, "\n".join(data_lines)


def frame_data(frame: bytes) -> bytes:
    """The data of one SSE frame as bytes: the common one-line `data: …` frame without decoding it, others as
    `parse_frame` reads them."""
    if frame.startswith(b"data:") and b"\n" not in frame and b"\r" not in frame:
        return frame[6:] if frame[5:6] == b" " else frame[5:]
    return parse_frame(frame)[1].encode()


def split_frames(text: bytes) -> list[bytes]:
    """Every complete frame of an SSE body, without delimiters (used when assembling a stored stream)."""
    # Without a carriage return the only delimiter is a blank line, which bytes.split finds without the regex.
    frames = FRAME_DELIMITER.split(text) if b"\r" in text else text.split(b"\n\n")
    return [frame for frame in frames if frame.strip()]


def plain_events(body: bytes) -> list[dict[str, Any]] | None:
    """The JSON payloads of the stream nearly every provider sends, read in bulk: one-line `data: ` frames split by
    blank lines, each a JSON object orjson reads, and `[DONE]` last. None where the stream is any other (the frame by
    frame reading then gives the same events)."""
    frames = plain_frames(body)
    return None if frames is None else plain_frame_events(frames)


def plain_frames(body: bytes) -> list[bytes] | None:
    """A body split at its blank lines where every newline is in a delimiter (no frame of several lines, no `\r`)."""
    if b"\r" in body:
        return None
    frames = body.split(b"\n\n")
    return frames if body.count(b"\n") == 2 * (len(frames) - 1) else None


def plain_frame_events(frames: list[bytes]) -> list[dict[str, Any]] | None:
    """`plain_events` of a body's `plain_frames` (or of frames made of their pieces); changes the list."""
    if not frames[-1]:
        frames.pop()
    if not all(map(_IS_DATA, frames)):
        return None
    datas = list(map(_DATA, frames))  # map, not a comprehension: no Python code runs a frame
    if datas and datas[-1] == b"[DONE]":
        datas.pop()
    try:
        events = list(map(orjson.loads, datas))
    except orjson.JSONDecodeError:
        return None
    if all(events) and set(map(type, events)) <= {dict}:
        return events
    return None
