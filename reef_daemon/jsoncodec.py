"""JSON on the paths every exchange takes: orjson where it can, the standard library where orjson refuses what
JSON readers elsewhere accept (an upstream's NaN, a body in UTF-16), so speed never changes what is read or kept."""

from __future__ import annotations

import json
from typing import Any

import orjson


def loads_lenient(raw: bytes | str) -> Any:
    """`raw` read as JSON as the standard library reads it (raises ValueError or RecursionError where it does)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def dumps_text(value: Any) -> str:
    """Compact JSON text, non-ASCII kept as is; text that is not Unicode (a lone surrogate) is escaped instead."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # a lone surrogate, an int beyond 64 bits, a type orjson does not write
        return json.dumps(value, separators=(",", ":"))
