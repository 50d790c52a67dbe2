"""Record ids: 32 hex characters, time-ordered so the store's unique index appends instead of scattering."""

from __future__ import annotations

import os
import threading
import time

_POOL_IDS = 256  # ids' worth of random bytes read at once: os.urandom releases the GIL, so it is kept off the
_ID_RANDOM_BYTES = 10  # per-request path (a writer thread would take the interpreter at each call)


class _RandomPool:
    """Cryptographic random bytes, read from the OS a pool at a time and handed out in order, never twice."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool = b""
        self._at = 0

    def take(self, size: int) -> bytes:
        with self._lock:
            if self._at + size > len(self._pool):
                self._pool, self._at = os.urandom(size * _POOL_IDS), 0
            start = self._at
            self._at += size
            return self._pool[start : self._at]

    def forget(self) -> None:
        """A forked child must not hand out its parent's bytes again."""
        self._lock = threading.Lock()
        self._pool, self._at = b"", 0


_RANDOM = _RandomPool()
os.register_at_fork(after_in_child=_RANDOM.forget)


def new_record_id() -> str:
    """48 bits of milliseconds since the epoch, then 80 random bits (the shape of a UUIDv7, without its tag bits)."""
    return f"{time.time_ns() // 1_000_000:012x}{_RANDOM.take(_ID_RANDOM_BYTES).hex()}"
