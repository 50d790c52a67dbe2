"""How a refusal names what was probably meant, in the same words on both sides: the daemon's settings and recipes,
the CLI's scenarios."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """` (did you mean NAME?)` for the name of `known` closest to `word`, or "" when none is close."""
    close = difflib.get_close_matches(word, list(known), n=1)
    return f" (did you mean {close[0]}?)" if close else ""
