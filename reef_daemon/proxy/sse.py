"""Relaying a provider's SSE stream frame by frame, holding back only its terminal frame.

Bytes are forwarded unchanged. Only what the receipt needs is parsed: the terminal frame of each API, and the
identity of the first chat completion chunk. The terminal frame is released after the record is stored, with
the receipt added as API.md says.

A chat stream whose usage reef asked for though the client did not (runtimes/stream_usage.py) is relayed as it
would have come without the option: its usage-only chunk, found by its words and parsed alone, is recorded but not
forwarded, and the `"usage":null` the upstream puts in every other chunk is taken out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reef_contract import CHAT_ROUTE, MESSAGES_ROUTE, RESPONSES_ROUTE
from reef_daemon.jsoncodec import dumps_text, loads_lenient
from reef_daemon.records import FRAME_DELIMITER, parse_frame

_CHAT_IDENTITY_KEYS = ("id", "created", "model", "system_fingerprint", "service_tier")
_RESPONSES_TERMINAL = ("response.completed", "response.incomplete")


def _json_object(data: str) -> dict[str, Any] | None:
    try:
        value = loads_lenient(data)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _dump(value: dict[str, Any]) -> str:
    return dumps_text(value)


@dataclass
class SseRelay:
    """Feeds on upstream bytes; says what to forward now and which terminal frame to hold back."""

    route: str
    hide_usage: bool = False  # reef asked for the usage, not the client: its chunk is for the record only
    _pending: bytes = b""
    _terminal: bytes | None = None
    _terminal_payload: dict[str, Any] | None = None
    _terminal_event: str | None = None
    _identity: dict[str, Any] | None = None
    _after_terminal: list[bytes] = field(default_factory=list)
    _carriage_returns: bool = False  # seen a `\r`: delimiters may be `\r\n\r\n` or `\r\r` too

    @property
    def terminated(self) -> bool:
        return self._terminal is not None

    def feed(self, data: bytes) -> bytes:
        """Bytes to forward now. A terminal frame is kept back until `finish` gives the receipt."""
        forward = self._forward(data)
        return self._without_usage(forward) if self.hide_usage and forward else forward

    def _forward(self, data: bytes) -> bytes:
        """`feed` before a usage chunk is hidden: whole frames, up to the terminal one."""
        if self._terminal is not None:
            self._after_terminal.append(data)
            return b""
        buffer = self._pending + data if self._pending else data
        self._carriage_returns = self._carriage_returns or b"\r" in data
        if self.route == CHAT_ROUTE and not self._carriage_returns and b"\n\n\n" not in buffer:
            return self._feed_chat(buffer)
        start = 0
        while True:
            bounds = self._next_delimiter(buffer, start)
            if bounds is None:
                break
            frame_end, next_start = bounds
            if self._is_terminal(buffer[start:frame_end]):
                self._terminal = buffer[start:next_start]
                rest = buffer[next_start:]
                if rest:
                    self._after_terminal.append(rest)
                self._pending = b""
                return buffer[:start]
            start = next_start
        self._pending = buffer[start:]
        return buffer[:start]

    def _feed_chat(self, buffer: bytes) -> bytes:
        """`feed` for a chat stream of plain `\n\n` delimiters with no run of three newlines, so that each frame
        starts right after the last pair before any of its bytes. The frames that matter are found by their words
        instead of walking every frame: the first chunk's identity, and each `[DONE]` until one is the terminal."""
        complete = buffer.rfind(b"\n\n") + 2  # the end of the last whole frame
        if complete < 2:
            self._pending = buffer
            return b""
        terminal = self._chat_terminal(buffer, complete)
        forwarded = complete if terminal is None else terminal[0]
        if self._identity is None:
            self._find_identity(buffer, forwarded)
        if terminal is None:
            self._pending = buffer[complete:]
            return buffer[:complete]
        start, end = terminal
        self._terminal = buffer[start : end + 2]
        if end + 2 < len(buffer):
            self._after_terminal.append(buffer[end + 2 :])
        self._pending = b""
        return buffer[:start]

    @staticmethod
    def _chat_terminal(buffer: bytes, complete: int) -> tuple[int, int] | None:
        """The bounds of the first whole frame before `complete` whose data is `[DONE]`."""
        found = buffer.find(b"[DONE]", 0, complete)
        while found >= 0:
            start, end = _frame_around(buffer, found)
            if _is_done(buffer[start:end]):
                return start, end
            found = buffer.find(b"[DONE]", end, complete)
        return None

    def _find_identity(self, buffer: bytes, before: int) -> None:
        """Remembers the identity of the first parseable chunk among the whole frames before `before`."""
        found = buffer.find(b"chat.completion.chunk", 0, before)
        while found >= 0 and self._identity is None:
            start, end = _frame_around(buffer, found)
            self._remember_identity(buffer[start:end])
            found = buffer.find(b"chat.completion.chunk", end, before)

    def _without_usage(self, frames: bytes) -> bytes:
        """Whole `frames` as the client would have had them without `include_usage`: no usage-only chunk, no
        `"usage":null` (OpenAI's in each chunk of a stream that asked for the usage)."""
        if b'"usage"' not in frames:
            return frames
        frames = frames.replace(b',"usage":null', b"").replace(b', "usage": null', b"")
        kept: list[bytes] = []
        start, found = 0, _usage_object(frames, 0)
        while found >= 0:
            begin, end, after = self._frame_holding(frames, found)
            payload = _json_object(parse_frame(frames[begin:end])[1])
            if payload is not None and payload.get("choices") == [] and isinstance(payload.get("usage"), dict):
                kept.append(frames[start:begin])
                start = after
            found = _usage_object(frames, after)
        return frames if start == 0 else b"".join([*kept, frames[start:]])

    def _frame_holding(self, frames: bytes, position: int) -> tuple[int, int, int]:
        """(start, end, start of the next) of the frame of whole `frames` that holds `position`."""
        start = 0
        while (bounds := self._next_delimiter(frames, start)) is not None:
            end, after = bounds
            if position < end:
                return start, end, after
            start = after
        return start, len(frames), len(frames)

    def _next_delimiter(self, buffer: bytes, start: int) -> tuple[int, int] | None:
        """(end of the frame, start of the next) for the first frame delimiter at or after `start`."""
        if not self._carriage_returns:  # the common case: plain `\n\n`, found without a regex
            found = buffer.find(b"\n\n", start)
            return None if found < 0 else (found, found + 2)
        match = FRAME_DELIMITER.search(buffer, start)
        return None if match is None else (match.start(), match.end())

    def remainder(self) -> bytes:
        """What is left unsent when the upstream ends without a terminal frame."""
        rest, self._pending = self._pending, b""
        return rest

    def finish(self, receipt: str | None) -> bytes:
        """The held-back terminal frame (with the receipt when there is one) and anything after it."""
        assert self._terminal is not None
        tail = b"".join(self._after_terminal)
        if receipt is None:
            return self._terminal + tail
        stamp = {"agent_record_id": receipt}
        if self.route == CHAT_ROUTE:
            chunk: dict[str, Any] = {"object": "chat.completion.chunk", **(self._identity or {})}
            chunk.update(choices=[], reef=stamp)
            return f"data: {_dump(chunk)}\n\n".encode() + self._terminal + tail
        payload = dict(self._terminal_payload or {})
        payload["reef"] = stamp
        event = self._terminal_event or payload.get("type")
        head = f"event: {event}\n" if event else ""
        return f"{head}data: {_dump(payload)}\n\n".encode() + tail

    def _is_terminal(self, frame: bytes) -> bool:
        if self.route == CHAT_ROUTE:
            if self._identity is None and b"chat.completion.chunk" in frame:
                self._remember_identity(frame)
            return b"[DONE]" in frame and _is_done(frame)
        if self.route == MESSAGES_ROUTE:
            wanted: tuple[str, ...] = ("message_stop",)
        elif self.route == RESPONSES_ROUTE:
            wanted = _RESPONSES_TERMINAL
        else:
            return False
        if not any(name.encode() in frame for name in wanted):
            return False
        event, data = parse_frame(frame)
        payload = _json_object(data)
        if payload is None or payload.get("type") not in wanted:
            return False
        self._terminal_event, self._terminal_payload = event, payload
        return True

    def _remember_identity(self, frame: bytes) -> None:
        payload = _json_object(parse_frame(frame)[1])
        if payload is not None:
            self._identity = {key: payload[key] for key in _CHAT_IDENTITY_KEYS if key in payload}


def _usage_object(frames: bytes, start: int) -> int:
    """Where the next `"usage"` key whose value is an object (not null) is, from `start`; -1 where there is none.
    Quotes inside a JSON string are escaped, so `"usage"` unescaped is a key (or a whole string, not followed by
    a colon)."""
    found = frames.find(b'"usage"', start)
    while found >= 0:
        after = frames[found + 7 : found + 23].lstrip()
        if after[:1] == b":" and after[1:].lstrip()[:1] == b"{":
            return found
        found = frames.find(b'"usage"', found + 7)
    return -1


def _is_done(frame: bytes) -> bool:
    """Whether a chat stream's frame is its terminal one: its data is `[DONE]`."""
    return parse_frame(frame)[1].strip() == "[DONE]"


def _frame_around(buffer: bytes, position: int) -> tuple[int, int]:
    """The start of the `\n\n`-delimited frame that holds `position`, and its end (its delimiter's first byte);
    a delimiter follows `position`."""
    start = buffer.rfind(b"\n\n", 0, position)
    start = 0 if start < 0 else start + 2
    return start, buffer.find(b"\n\n", position)


def error_frame(route: str, type_: str, message: str) -> bytes:
    """A frame that makes each API's SDK raise a clear error when the stream breaks after it began."""
    body: dict[str, Any]
    if route == MESSAGES_ROUTE:
        body = {"type": "error", "error": {"type": type_, "message": message}}
        return f"event: error\ndata: {_dump(body)}\n\n".encode()
    if route == RESPONSES_ROUTE:
        body = {"type": "error", "code": type_, "message": message, "param": None}
        return f"event: error\ndata: {_dump(body)}\n\n".encode()
    return f"data: {_dump({'error': {'type': type_, 'message': message}})}\n\n".encode()
