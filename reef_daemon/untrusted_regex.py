"""Regular expressions that come from a model or a client (a task's regex, a behaviour check, a trial's --expect):
checked and matched with one module, `regex`, so a pattern accepted is one that can run, and matched within a time
bound, so a pattern that backtracks catastrophically costs `TIMEOUT_S` and not the daemon.

Matching runs in a worker thread with the GIL released (`concurrent=True`): the event loop keeps serving while it
runs. Compiling runs on the caller's thread: `regex` writes a repeat of an exact count (`{n}`) out n times, so
nested ones multiply (`((a{1000}){1000}){1000}` would take gigabytes); `compiled` refuses a pattern whose written-out
size, estimated from its text, passes `UNROLLED_LIMIT`, before `regex` sees it.
"""

from __future__ import annotations

import asyncio
import re
import warnings
from dataclasses import dataclass
from typing import Final

import regex

TIMEOUT_S: Final = 1.0
UNROLLED_LIMIT: Final = 20_000  # items a pattern may write out; compiling that many takes some 30 ms
_COUNT = re.compile(r"\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")  # a repeat count: {n}, {n,m}, {n,}


class BadPattern(ValueError):
    """Why a pattern cannot be used; the text reads after the pattern's name ("does not compile: ...")."""


@dataclass(frozen=True)
class Found:
    """Whether a pattern matched, and why it could not tell where it could not (then `matched` is False)."""

    matched: bool
    problem: str | None = None


def compiled(pattern: str) -> regex.Pattern[str]:
    """`pattern` compiled as it will be matched, or BadPattern saying why it cannot be."""
    if unrolled_size(pattern) > UNROLLED_LIMIT:
        raise BadPattern(f"repeats too much: its exact repeat counts ({{n}}) write out over {UNROLLED_LIMIT} items")
    try:
        with warnings.catch_warnings():
            # "Possible nested set": a version-0 pattern reads `[[` as `re` does; the warning says nothing to act on.
            warnings.simplefilter("ignore", FutureWarning)
            return regex.compile(pattern)
    except (regex.error, OverflowError, RecursionError) as exc:  # RecursionError: parentheses nested deep
        raise BadPattern(f"does not compile: {exc or type(exc).__name__}") from None


async def search(pattern: str, text: str, timeout_s: float = TIMEOUT_S) -> Found:
    """Whether `pattern` matches somewhere in `text`; a pattern that cannot be used, or that runs past `timeout_s`,
    does not match, and `problem` says which."""
    try:
        matcher = compiled(pattern)
    except BadPattern as exc:
        return Found(False, f"regex {exc}")
    try:
        hit = await asyncio.to_thread(matcher.search, text, timeout=timeout_s, concurrent=True)
    except TimeoutError:
        return Found(False, f"regex timed out after {timeout_s:g} s")
    return Found(hit is not None)


def unrolled_size(pattern: str) -> int:
    """An upper estimate of how many items `regex` writes out for `pattern`, up to just past `UNROLLED_LIMIT`: every
    character or escape counts one, and an exact repeat count multiplies the item or group before it."""
    cap = UNROLLED_LIMIT + 1
    groups = [0]  # the size of each group still open, outermost first
    last = 0  # the size of the item a repeat count would apply to
    at = 0
    while at < len(pattern):
        char = pattern[at]
        count = _COUNT.match(pattern, at) if char == "{" else None
        if count is not None:
            low, high = _number(count[1]), count[2]
            if high is None or (high and _number(high) == low):  # only an exact count is written out; a range loops
                groups[-1] = min(groups[-1] + last * (low - 1), cap)
                last = min(last * low, cap)
            at = count.end()
        elif char == "(":
            groups.append(0)
            at += 1
        elif char == ")" and len(groups) > 1:
            last = groups.pop()
            groups[-1] = min(groups[-1] + last, cap)
            at += 1
        else:
            at = _class_end(pattern, at) if char == "[" else at + (2 if char == "\\" else 1)
            groups[-1] = min(groups[-1] + 1, cap)
            last = 1
    return min(sum(groups), cap)


def _number(digits: str) -> int:
    """A repeat count's value, up to just past `UNROLLED_LIMIT` (Python refuses to read very long numbers)."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= 9 else UNROLLED_LIMIT + 1


def _class_end(pattern: str, start: int) -> int:
    """Where the character class opening at `start` ends (a `]` right after `[` or `[^` belongs to the class)."""
    at = start + 1
    if pattern.startswith("^", at):
        at += 1
    if pattern.startswith("]", at):
        at += 1
    while at < len(pattern) and pattern[at] != "]":
        at += 2 if pattern[at] == "\\" else 1
    return at + 1
