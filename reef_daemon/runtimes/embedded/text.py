"""Token ids to text as they are generated: whole characters only, stop sequences cut and never shown."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class TextAssembler:
    """Accumulates generated ids and hands out the text that is safe to send so far.

    Text is held back while it ends in an incomplete UTF-8 character or could still become a stop sequence.
    """

    def __init__(self, tokenizer: Any, stop: tuple[str, ...]) -> None:
        self._decode = decoding(tokenizer)
        self._stop = tuple(s for s in stop if s)
        self._ids: list[int] = []
        self._sent = 0  # characters of the decoded text already handed out
        # Incremental decoding: only the ids since `_prefix` are decoded for each new token (decoding them all is
        # quadratic in the answer's length); the text of `_prefix:_read` is what they gave last time.
        self._decoded = ""
        self._prefix = 0
        self._read = 0
        self.text = ""
        self.stopped_by: str | None = None

    def add(self, token: int) -> str:
        """Take one generated (non end-of-turn) id; return the new text to send, possibly empty."""
        self._ids.append(token)
        window = self._decode(self._ids[self._prefix :])
        if window.endswith("\ufffd"):
            return ""  # part of a multi-byte character; the next token completes it
        known = self._decode(self._ids[self._prefix : self._read])
        self._decoded += window[len(known) :]
        self._prefix, self._read = self._read, len(self._ids)
        decoded = self._decoded
        for stop in self._stop:
            at = decoded.find(stop, max(0, self._sent - len(stop) + 1))
            if at != -1:
                self.stopped_by = stop
                return self._advance(decoded[:at])
        hold = max((_overlap(decoded, stop) for stop in self._stop), default=0)
        return self._advance(decoded[: len(decoded) - hold] if hold else decoded)

    def finish(self) -> str:
        """At the end of generation: whatever was held back for a stop sequence that never came."""
        if self.stopped_by is not None:
            return ""
        decoded = self._decode(self._ids)
        return self._advance(decoded.rstrip("\ufffd"))

    def _advance(self, upto: str) -> str:
        new = upto[self._sent :]
        self._sent = max(self._sent, len(upto))
        self.text += new
        return new


def decoding(tokenizer: Any) -> Callable[[list[int]], str]:
    """The tokenizer's text of some ids, special tokens left out. Where it is a `tokenizers` backend's decoding with
    nothing added (no clean-up of spaces), the backend is called directly: the same text, without the Python of
    transformers around it, which a token's two decodings ran cold, after a decoding step's weights had swept the
    caches (~70 µs against ~33 for the backend's)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and getattr(tokenizer, "clean_up_tokenization_spaces", True) is False:
        return lambda ids: str(backend.decode(ids, skip_special_tokens=True))
    return lambda ids: str(tokenizer.decode(ids, skip_special_tokens=True))


def _overlap(text: str, stop: str) -> int:
    """Length of the longest end of `text` that is a beginning of `stop`."""
    for size in range(min(len(stop) - 1, len(text)), 0, -1):
        if text.endswith(stop[:size]):
            return size
    return 0
