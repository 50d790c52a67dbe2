"""Regular expressions that come from a model or a client (a task's regex, a behaviour check, a trial's --expect):
checked and matched with one module, `regex`, so a pattern accepted is one that can run, and matched within a time
bound, so a pattern that backtracks catastrophically costs `TIMEOUT_S` and not the daemon.

Matching runs in a worker thread with the GIL released (`concurrent=True`): the event loop keeps serving while it
runs. Compiling can cost more than matching: `regex` writes a repeat of an exact count (`{n}`) out n times, so nested
ones multiply (`((a{1000}){1000}){1000}` would take gigabytes). So `compiled` first refuses a pattern whose
written-out size, estimated from its text, passes `UNROLLED_LIMIT`; then, since flags change how the text reads
(verbose mode's `(?x)(a {3000}) {1000}` is a million items that the estimate cannot see), it compiles the pattern
once in a child process held to `RegexBounds` (CPU seconds and MiB: the settings harness.regex-compile-s and
harness.regex-compile-mb for a task's regex, their defaults elsewhere) and refuses what passes either, before
compiling it here. `compiled` blocks; the event loop calls `checked`, which runs it in a worker thread.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final

import regex

TIMEOUT_S: Final = 1.0
UNROLLED_LIMIT: Final = 20_000  # items a pattern may write out; compiling that many takes some 30 ms
_COUNT = re.compile(r"\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")  # a repeat count: {n}, {n,m}, {n,}
COMPILE_S: Final = 1.0  # harness.regex-compile-s
COMPILE_MB: Final = 128  # harness.regex-compile-mb
_STARTUP_S: Final = 60.0  # how long the child may take to start before its own clock runs (a loaded machine)
_OUT_OF_MEMORY: Final = 3  # the child's exit status when the pattern needs more memory than it may take
COMPILERS: Final = 2  # patterns compiled at once, so many requests cost at most this many children's memory
_CHILDREN = threading.BoundedSemaphore(COMPILERS)
# `checked` compiles on threads of its own: a queue of patterns never takes the threads the store's reader uses.
_COMPILING = ThreadPoolExecutor(COMPILERS, thread_name_prefix="reef-regex-compile")
# The child reads the pattern from stdin, holds itself to the bounds, compiles, and exits 0 (a pattern that does not
# compile exits 0 too: compiling it here says why). The clock is the child's CPU time (ITIMER_PROF), so a loaded machine
# does not make a cheap pattern look slow; SIGPROF's default action ends it, even inside C code.
_CHILD: Final = """
import resource, signal, sys, warnings
pattern = sys.stdin.buffer.read().decode("utf-8", "surrogatepass")
seconds, mib = float(sys.argv[1]), int(sys.argv[2])
import regex
size = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (size + mib * 1024 * 1024, resource.RLIM_INFINITY))
warnings.simplefilter("ignore")
signal.setitimer(signal.ITIMER_PROF, seconds)
try:
    regex.compile(pattern, cache_pattern=False)
except MemoryError:
    sys.exit(3)
except BaseException:
    pass
"""


class BadPattern(ValueError):
    """Why a pattern cannot be used; the text reads after the pattern's name ("does not compile: ...")."""


@dataclass(frozen=True)
class RegexBounds:
    """What compiling one untrusted pattern may take: seconds and MiB (harness.regex-compile-s, -mb)."""

    seconds: float = COMPILE_S
    mib: int = COMPILE_MB


DEFAULT_BOUNDS: Final = RegexBounds()


@dataclass(frozen=True)
class Found:
    """Whether a pattern matched, and why it could not tell where it could not (then `matched` is False)."""

    matched: bool
    problem: str | None = None


def compiled(pattern: str, bounds: RegexBounds = DEFAULT_BOUNDS) -> regex.Pattern[str]:
    """`pattern` compiled as it will be matched, or BadPattern saying why it cannot be. Blocks for as long as
    compiling takes (up to `bounds.seconds`, twice): on the event loop, await `checked` instead."""
    if unrolled_size(pattern) > UNROLLED_LIMIT:
        raise BadPattern(f"repeats too much: its exact repeat counts ({{n}}) write out over {UNROLLED_LIMIT} items")
    _within_bounds(pattern, bounds)
    try:
        with warnings.catch_warnings():
            # "Possible nested set": a version-0 pattern reads `[[` as `re` does; the warning says nothing to act on.
            warnings.simplefilter("ignore", FutureWarning)
            # Not kept in `regex`'s own cache: a large accepted pattern would stay in memory after its request.
            return regex.compile(pattern, cache_pattern=False)
    except (regex.error, OverflowError, RecursionError) as exc:  # RecursionError: parentheses nested deep
        raise BadPattern(f"does not compile: {exc or type(exc).__name__}") from None


async def checked(pattern: str, bounds: RegexBounds = DEFAULT_BOUNDS) -> regex.Pattern[str]:
    """`compiled`, off the event loop (on threads of its own)."""
    return await asyncio.get_running_loop().run_in_executor(_COMPILING, compiled, pattern, bounds)


def _within_bounds(pattern: str, bounds: RegexBounds) -> None:
    """Compile `pattern` once in a child process held to `bounds`; BadPattern when it passes one."""
    try:
        with _CHILDREN:
            child = subprocess.run(  # this interpreter and a constant program; the pattern goes to stdin
                [sys.executable, "-I", "-c", _CHILD, repr(bounds.seconds), str(bounds.mib)],
                input=pattern.encode("utf-8", "surrogatepass"),
                capture_output=True,
                timeout=_STARTUP_S + bounds.seconds,
                check=False,
            )
    except subprocess.TimeoutExpired:
        raise BadPattern(_too_slow(bounds)) from None
    if child.returncode == _OUT_OF_MEMORY:
        raise BadPattern(
            f"needs more than {bounds.mib} MiB to compile (the bound is the setting harness.regex-compile-mb)"
        )
    if child.returncode != 0:  # ended by its CPU clock (or killed for memory by the system)
        raise BadPattern(_too_slow(bounds))


def _too_slow(bounds: RegexBounds) -> str:
    return (
        f"takes more than {bounds.seconds:g} s of CPU or more than {bounds.mib} MiB to compile (the bounds are "
        "the settings harness.regex-compile-s and harness.regex-compile-mb)"
    )


async def search(pattern: str, text: str, timeout_s: float = TIMEOUT_S, bounds: RegexBounds = DEFAULT_BOUNDS) -> Found:
    """Whether `pattern` matches somewhere in `text`; a pattern that cannot be used, or that runs past `timeout_s`,
    does not match, and `problem` says which."""
    try:
        matcher = await checked(pattern, bounds)
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
