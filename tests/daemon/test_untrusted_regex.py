"""Untrusted regular expressions: one that backtracks without end is stopped at the time bound while the event loop
keeps serving; one that would take gigabytes to compile is refused before it is compiled."""

from __future__ import annotations

import asyncio

import pytest

from reef_daemon.untrusted_regex import (
    TIMEOUT_S,
    BadPattern,
    Found,
    RegexBounds,
    checked,
    compiled,
    search,
    unrolled_size,
)

CATASTROPHIC = "(a|a)+$"  # backtracks 2**n ways on n a's and then a b


async def test_a_pattern_that_runs_too_long_does_not_match_and_the_loop_keeps_serving() -> None:
    searching = asyncio.create_task(search(CATASTROPHIC, "a" * 40 + "b"))
    await asyncio.sleep(0)  # the search starts
    assert not searching.done()  # this coroutine runs while the pattern does
    assert await searching == Found(False, f"regex timed out after {TIMEOUT_S:g} s")
    assert await search(CATASTROPHIC, "aaa") == Found(True)
    assert await search("four", "Paris.") == Found(False)


async def test_a_pattern_that_cannot_be_used_does_not_match_and_says_why() -> None:
    found = await search("(unclosed", "(unclosed")
    assert not found.matched and found.problem is not None and found.problem.startswith("regex does not compile: ")


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("(unclosed", "does not compile: missing ) at position 9"),
        ("a{4294967296,}", "does not compile: repeat count too big at position 2"),
        ("a{4294967296}", "repeats too much"),
        ("(" * 4000 + ")" * 4000, "does not compile: "),
        ("((a{1000}){1000}){1000}", "repeats too much"),
        ("(?:a+){1000000}", "repeats too much"),
        ("[ab]{" + "9" * 5000 + "}", "repeats too much"),
    ],
)
def test_a_pattern_that_cannot_be_used_is_refused_with_the_reason(pattern: str, why: str) -> None:
    with pytest.raises(BadPattern) as refused:
        compiled(pattern)
    assert str(refused.value).startswith(why)


@pytest.mark.parametrize(
    "pattern",
    [
        "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        r"\d{4}-\d{2}-\d{2}",
        "(?:a+){1,1000000}",  # a range is a loop, not written out
        r"\p{L}+",  # `regex` syntax: accepted, since it is what runs
        "[[a]",  # read as `re` reads it, without a warning
        r"\{1000000}|[{]1000000}",  # braces that are text
    ],
)
def test_ordinary_patterns_are_accepted(pattern: str) -> None:
    assert compiled(pattern).pattern == pattern
    assert unrolled_size(pattern) <= 100


def test_the_written_out_size_multiplies_nested_exact_counts() -> None:
    assert unrolled_size("abc") == 3
    assert unrolled_size("(ab){3}c") == 7
    assert unrolled_size("(x{10}){10}") == 100
    assert unrolled_size("a{2,}b{2,5}c{5,5}") == 1 + 1 + 5


# Verbose mode ignores the spaces, so each of these is a million `a`s written out; the estimate reads the text as
# written (the spaces are what repeat), and version 1 reads `[[x])]` as one nested set where the estimate ends it early.
VERBOSE_BOMB = "(?x)(a {3000}) {1000}"
HIDDEN_BOMBS = [VERBOSE_BOMB, "(?V1)(a{1000}[[x])]){1000}", "(?x)(a{1000}#(\n){1000}"]


@pytest.mark.parametrize("pattern", HIDDEN_BOMBS)
def test_a_pattern_whose_flags_hide_its_size_is_refused_by_the_compile_bound(pattern: str) -> None:
    with pytest.raises(BadPattern) as refused:
        compiled(pattern)
    assert "MiB to compile" in str(refused.value)
    assert "harness.regex-compile-mb" in str(refused.value)


def test_the_compile_bounds_are_the_ones_given_and_the_refusal_names_them() -> None:
    with pytest.raises(BadPattern) as slow:
        compiled(VERBOSE_BOMB, RegexBounds(seconds=0.05, mib=100_000))
    assert str(slow.value).startswith("takes more than 0.05 s of CPU or more than 100000 MiB to compile")
    assert "harness.regex-compile-s" in str(slow.value)
    with pytest.raises(BadPattern, match=r"^needs more than 16 MiB to compile"):
        compiled(VERBOSE_BOMB, RegexBounds(seconds=60, mib=16))
    assert compiled("(?x) a {3} ", RegexBounds(seconds=60, mib=16)).fullmatch("aaa")
    assert compiled("é+\udc00?").match("éé")  # any text reaches the child as it is, a lone surrogate too


async def test_compiling_a_hostile_pattern_leaves_the_event_loop_serving() -> None:
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticking = asyncio.create_task(tick())
    try:
        with pytest.raises(BadPattern):
            await checked(VERBOSE_BOMB)
    finally:
        ticking.cancel()
    assert ticks >= 5  # the loop ran all along (compiling it here would take seconds without a tick)
    assert (await search(VERBOSE_BOMB, "aaa")).problem == f"regex {_refusal(VERBOSE_BOMB)}"


def _refusal(pattern: str) -> str:
    with pytest.raises(BadPattern) as refused:
        compiled(pattern)
    return str(refused.value)
