"""JSON on the paths every exchange takes: orjson where it can, the standard library where orjson refuses what
JSON readers elsewhere accept (an upstream's NaN, a body in UTF-16), so speed never changes what is read or kept."""

from __future__ import annotations

import json
from typing import Any

import orjson

# orjson reads an integer beyond 64 bits as a float; a body with a run of this many digits is read by the
# standard library instead, which keeps every integer exact (the run may be inside a string: then it only costs time).
_LONG_RUN = 19
# Every ASCII digit becomes "0" and every other byte a space, so a run of digits is a run of zeros that
# `bytes.find` looks for at C speed (a regex tries a match at every byte: ~10x slower on a 3 KB stream).
_DIGITS_AS_ZEROS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_ZEROS = b"0" * _LONG_RUN


def may_hold_a_long_integer(raw: bytes) -> bool:
    """Whether `raw` has a run of 19 or more ASCII digits (an integer orjson might not read exactly)."""
    return raw.translate(_DIGITS_AS_ZEROS).find(_ZEROS) >= 0


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
