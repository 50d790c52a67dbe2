"""Reusing the context of the last long prompt: agents resend the same system prompt and history every turn.

The key/value cache of the last long prompt read is kept (one entry: it can hold hundreds of MB); a new request
whose prompt starts the same way starts from a copy of it and reads only the rest, when the same weights (the
base, or the same adapter version) read it. The entry is dropped when the base weights change.
"""

from __future__ import annotations

import copy
from typing import Any

MIN_PROMPT = 256  # shorter prompts are read quickly; keeping them is not worth the copy
MIN_SHARED = 64  # fewer shared tokens than this: read the whole prompt


class PrefixCache:
    """The KV cache of the last long prompt, keyed by its token ids."""

    def __init__(self) -> None:
        self._ids: list[int] = []
        self._cache: Any = None
        self._version = ""

    def keep(self, ids: list[int], cache: Any, version: str) -> None:
        """Remember a copy of `cache`, which holds exactly the keys and values of `ids` read by `version`."""
        if len(ids) >= MIN_PROMPT:
            self._ids, self._cache, self._version = list(ids), copy.deepcopy(cache), version

    def start(self, ids: list[int], version: str) -> tuple[Any, int]:
        """A cache holding the longest kept prefix of `ids` (leaving at least one id to read) as `version` read it,
        and its length."""
        if self._cache is None or version != self._version:
            return None, 0
        shared = 0
        for kept, new in zip(self._ids, ids, strict=False):
            if kept != new:
                break
            shared += 1
        shared = min(shared, len(ids) - 1)
        if shared < MIN_SHARED:
            return None, 0
        cache = copy.deepcopy(self._cache)
        cache.crop(shared - len(self._ids))  # a negative count: how many positions to drop from the end
        return cache, shared

    def clear(self) -> None:
        self._ids, self._cache = [], None
