"""JSON on the paths every exchange takes: orjson where it can, the standard library where orjson refuses what
JSON readers elsewhere accept (an upstream's NaN, a body in UTF-16), so speed never changes what is read or kept."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

# orjson reads an integer beyond 64 bits as a float; a body with a run of this many digits is read by the
# standard library instead, which keeps every integer exact (the run may be inside a string: then it only costs time).
_LONG_DIGITS = re.compile(rb"\d{19}")


def may_hold_a_long_integer(raw: bytes) -> bool:
    return _LONG_DIGITS.search(raw) is not None


def loads_lenient(raw: bytes | str) -> Any:
    """`raw` read as JSON as the standard library reads it (raises ValueError or RecursionError where it does)."""
    if may_hold_a_long_integer(raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")):
        return json.loads(raw)
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
