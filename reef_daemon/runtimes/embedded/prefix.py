"""Reusing the context of the last prompt read: agents resend the same system prompt and history every turn, and
the same prompt comes again (a regenerated answer, a retry, several answers sampled for one prompt at once).

The key/value cache of the last prompt read is kept, with its last position's logits (one entry: it can hold
hundreds of MB), for the weights that read it (the base, or one adapter version); it is dropped when the base
weights change. The same prompt again starts from a copy of both and reads nothing: its first token is picked from
the very logits a fresh read gives, so its answer is what it would be alone. A long prompt that starts the same way
starts from a copy of the shared part and reads only the rest (whose log-probs may then differ slightly from a
whole read: see test_a_long_shared_prompt_prefix_gives_the_same_answer).
"""

from __future__ import annotations

import copy
from typing import Any, NamedTuple

import torch

MIN_PROMPT = 256  # shorter prompts are read quickly: only the same prompt again reuses them
MIN_SHARED = 64  # fewer shared tokens than this: read the whole prompt


class Reuse(NamedTuple):
    """Where reading a prompt starts: a cache holding its first `shared` positions (None: from nothing), and, where
    it holds them all, the logits of the last."""

    cache: Any
    shared: int
    logits: torch.Tensor | None


NOTHING = Reuse(None, 0, None)


class PrefixCache:
    """The KV cache of the last prompt read and its last logits, keyed by its token ids."""

    def __init__(self) -> None:
        self._ids: list[int] = []
        self._kept: tuple[Any, torch.Tensor] | None = None  # the cache and the last position's logits
        self._version = ""

    def keep(self, ids: list[int], cache: Any, logits: torch.Tensor, version: str) -> None:
        """Remember copies of `cache`, which holds exactly the keys and values of `ids` read by `version`, and of the
        logits its last position gave."""
        self._ids, self._version = list(ids), version
        self._kept = copy.deepcopy(cache), logits.detach().clone()

    def holds(self, ids: list[int], version: str) -> bool:
        """Whether `ids` are the kept prompt as `version` read it: starting them reads nothing."""
        return self._kept is not None and version == self._version and ids == self._ids

    def start(self, ids: list[int], version: str) -> Reuse:
        """Where `version` reading `ids` starts: all of it when they are the kept prompt; else the longest kept
        prefix of a long kept prompt (leaving at least one id to read); else nothing."""
        if self._kept is None or version != self._version:
            return NOTHING
        cache, logits = self._kept
        if ids == self._ids:
            return Reuse(copy.deepcopy(cache), len(ids), logits.clone())
        if len(self._ids) < MIN_PROMPT:
            return NOTHING
        shared = 0
        for kept, new in zip(self._ids, ids, strict=False):
            if kept != new:
                break
            shared += 1
        shared = min(shared, len(ids) - 1)
        if shared < MIN_SHARED:
            return NOTHING
        cache = copy.deepcopy(cache)
        cache.crop(shared - len(self._ids))  # a negative count: how many positions to drop from the end
        return Reuse(cache, shared, None)

    def clear(self) -> None:
        self._ids, self._kept = [], None
