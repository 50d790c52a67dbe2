"""The answers the next-turn judge keeps until a later request continues them, each under the key of its
conversation (`turns.conversation_keys`), bounded in bytes (`reports.next-turn-memory`): beyond the bound the oldest
are let go, and counted."""

from __future__ import annotations

import collections
import sys
from dataclasses import dataclass

# What one kept answer costs beside its strings: its key, its place in the ordered dict, the object itself.
ENTRY_BYTES = 256


@dataclass(frozen=True, slots=True)
class Answered:
    """An answer waiting for its conversation's next request: its record, the end of the answer (as much as the
    judge is shown) and the model that gave it."""

    record_id: str
    answer: str
    model: str | None

    @property
    def size(self) -> int:
        """The bytes it holds, as the memory's bound counts them."""
        strings = (self.record_id, self.answer, self.model)
        return ENTRY_BYTES + sum(sys.getsizeof(text) for text in strings if text is not None)


class AnsweredMemory:
    """Answers by conversation key, oldest first; at most `max_bytes` of them (`Answered.size`)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._kept: collections.OrderedDict[bytes, Answered] = collections.OrderedDict()

    def keep(self, key: bytes, answered: Answered) -> int:
        """Keep `answered` under `key` (an answer kept under the same key before, the same conversation answered
        the same way, gives way to it), letting the oldest go while the memory holds more than its bound; how many
        it let go."""
        self._drop(key)
        self._kept[key] = answered
        self.bytes += answered.size
        let_go = 0
        while self.bytes > self.max_bytes:
            _, oldest = self._kept.popitem(last=False)
            self.bytes -= oldest.size
            let_go += 1
        return let_go

    def find(self, key: bytes) -> Answered | None:
        """The answer kept under `key`, still kept; None when there is none."""
        return self._kept.get(key)

    def take(self, key: bytes) -> Answered | None:
        """The answer kept under `key`, no longer kept; None when there is none."""
        return self._drop(key)

    def _drop(self, key: bytes) -> Answered | None:
        answered = self._kept.pop(key, None)
        if answered is not None:
            self.bytes -= answered.size
        return answered
