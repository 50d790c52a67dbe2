"""Record ids: 32 hex characters, time-ordered so the store's unique index appends instead of scattering."""

from __future__ import annotations

import os
import time


def new_record_id() -> str:
    """48 bits of milliseconds since the epoch, then 80 random bits (the shape of a UUIDv7, without its tag bits)."""
    return f"{time.time_ns() // 1_000_000:012x}{os.urandom(10).hex()}"
