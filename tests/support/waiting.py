"""Waiting in tests for something to hold, never for a length of time: poll until a condition is met, or fail with
a message naming what was awaited and the last value seen.

Timeouts are deadlines, not attempt counts, and generous: the tests run on two shared cores, where a poll or the
thing polled can take many times longer than on a workstation. A deadline costs nothing when the condition holds.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

__all__ = ["eventually", "eventually_sync"]

T = TypeVar("T")
INTERVAL_S = 0.05
SHOWN_CHARS = 2000  # of the last value, in a failure message


def _gave_up(what: str, timeout: float, last: object) -> AssertionError:
    shown = repr(last)
    if len(shown) > SHOWN_CHARS:
        shown = shown[:SHOWN_CHARS] + "..."
    return AssertionError(f"gave up after {timeout:g} s waiting for {what}; last seen: {shown}")


@overload
async def eventually(
    condition: Callable[[], Awaitable[T]],
    timeout: float,
    what: str,
    *,
    satisfied: Callable[[T], object] = bool,
    pause: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> T: ...


@overload
async def eventually(
    condition: Callable[[], T],
    timeout: float,
    what: str,
    *,
    satisfied: Callable[[T], object] = bool,
    pause: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> T: ...


async def eventually(
    condition: Callable[[], Any],
    timeout: float,
    what: str,
    *,
    satisfied: Callable[[Any], object] = bool,
    pause: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> Any:
    """Poll `condition` (plain or async) until `satisfied` holds for what it returns, from an event loop.

    Args:
        condition: Called with no arguments; returns (or, if async, resolves to) the value to check.
        timeout: Seconds from the first call after which the wait fails.
        what: What is awaited, in words, for the failure message ("the request to settle").
        satisfied: Whether a value is the one awaited; by default, whether it is truthy.
        pause: Waits between polls, given `INTERVAL_S`; a Textual test passes `pilot.pause` so the app settles.

    Returns:
        The first value of `condition` that satisfied the wait.

    Raises:
        AssertionError: `timeout` passed first; the message names `what` and the last value seen.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if satisfied(value):
            return value
        if time.monotonic() >= deadline:
            raise _gave_up(what, timeout, value)
        await pause(INTERVAL_S)


def eventually_sync(
    condition: Callable[[], T], timeout: float, what: str, *, satisfied: Callable[[T], object] = bool
) -> T:
    """`eventually` for a test that runs no event loop of its own (it drives subprocesses or threads): the same
    arguments, returns and failure, blocking this thread between polls."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if satisfied(value):
            return value
        if time.monotonic() >= deadline:
            raise _gave_up(what, timeout, value)
        time.sleep(INTERVAL_S)
