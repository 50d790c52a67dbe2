"""The event loop's longest stall while the next-turn judge reads a long next message (1 MiB by default).

Everything runs in this process, on one event loop, as a deployment's daemon does: reef (the `record` recipe,
`reports.next-turn on`), the fake upstream and the scripted judge of the tests (`tests/support`). For each kind of
pasted message, a conversation's first answer is recorded, then a request continues it with the pasted message as the
user's next turn. A probe sleeps 1 ms at a time and keeps the longest overshoot: while reef proxies the long request
and while it records it (the proxy's own costs, for scale), and from when the judge begins to read the request
until it has judged the answer (the next-turn judge's cost).

    .venv/bin/python bench/next_turn_stall.py [--chars 1048576] [--rounds 3]

The kinds: `unclosed-tags` (`<a>` repeated, never closed: the input that was quadratic), `compiler-errors` (a C++
build log, full of `<…>`), `prose`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reef_daemon.reports import next_turn
from reef_daemon.reports.turns import Reading, read_request
from reef_daemon.settings import load_settings
from tests.support.app_servers import AppServers, url_of
from tests.support.fake_judge import FakeJudge
from tests.support.fake_upstream import FakeUpstream
from tests.support.reef_testing import Reef

ERROR_LINE = (
    "src/engine/graph.cpp:{n}:17: error: no matching function for call to "
    "'std::vector<std::pair<int, std::string>>::push(std::map<int, std::vector<char>>&)'\n"
    "  note: candidate template ignored: could not match 'std::allocator<T>' against 'Graph<Node<int>>'\n"
)


def pasted(kind: str, chars: int) -> str:
    """A next message of about `chars` characters, starting as a person's reply does."""
    if kind == "unclosed-tags":
        body = "<a>" * (chars // 3)
    elif kind == "compiler-errors":
        lines: list[str] = []
        n = 0
        while sum(map(len, lines)) < chars:
            lines.append(ERROR_LINE.format(n=n))
            n += 1
        body = "".join(lines)
    else:
        body = "The build still fails on the graph module, see the log above and fix it. " * (chars // 75)
    return "No, that did not work: " + body[:chars]


READ_AT: list[float] = []  # when the judge began reading each request (perf_counter)


def timed_read(seed: str, route: str, request: Any, answer: Any) -> Reading:
    READ_AT.append(time.perf_counter())
    return read_request(seed, route, request, answer)


async def stalls(during: Callable[[], Awaitable[Any]]) -> list[tuple[float, float]]:
    """Each 1 ms sleep of the loop while `during` ran: when it began, and how late it ended (ms)."""
    done = asyncio.Event()
    late: list[tuple[float, float]] = []

    async def probe() -> None:
        while not done.is_set():
            started = time.perf_counter()
            await asyncio.sleep(0.001)
            late.append((started, (time.perf_counter() - started - 0.001) * 1000))

    task = asyncio.create_task(probe())
    try:
        await during()
    finally:
        done.set()
        await task
    return late


async def one_round(reef: Reef, kind: str, chars: int, number: int) -> dict[str, float]:
    judge = reef.daemon.next_turn
    assert judge is not None
    session = {"x-reef-tag-session": f"{kind}-{number}"}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Build it. REEF-SAY[Built: see build/out.log.]"}]
    answered = await reef.post("/v1/chat/completions", {"model": "fake-model", "messages": messages}, headers=session)
    said = (await answered.json())["choices"][0]["message"]["content"]
    messages += [{"role": "assistant", "content": said}, {"role": "user", "content": pasted(kind, chars)}]
    settled = judge.counts.judged + judge.counts.no_judgment + judge.counts.over_bounds

    async def proxied() -> None:
        response = await reef.post("/v1/chat/completions", {"model": "fake-model", "messages": messages},
                                   headers=session)  # fmt: skip
        assert response.status == 200, await response.text()

    async def read_and_judged() -> None:
        while judge.counts.judged + judge.counts.no_judgment + judge.counts.over_bounds <= settled:
            await asyncio.sleep(0.01)

    proxy_ms = max(late for _, late in await stalls(proxied))
    started = time.perf_counter()
    after = await stalls(read_and_judged)
    read_at = READ_AT[-1]  # the continuation, read once the traffic paused; before it the exchange was recorded
    return {
        "proxy stall ms": proxy_ms,
        "recording stall ms": max([late for at, late in after if at < read_at], default=0.0),
        "judge stall ms": max(late for at, late in after if at >= read_at),
        "judged after s": time.perf_counter() - started,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chars", type=int, default=1024 * 1024, help="characters of the pasted next message")
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    next_turn.read_request = timed_read  # type: ignore[attr-defined]  # the bench times when reading begins
    servers = AppServers()
    try:
        with tempfile.TemporaryDirectory() as folder:
            judge_url = url_of(await servers.serve(FakeJudge().app()))
            upstream = FakeUpstream(max_body=64 * 1024**2)
            overrides = {
                "reef.state-dir": folder,
                "inference.upstream-url": url_of(await servers.serve(upstream.app())),
                "reports.next-turn": "on",
                "reports.judge-url": judge_url,
                "reports.judge-calls-per-minute": "100000",
            }
            server = await servers.reef(load_settings(overrides=overrides, environ={}))
            session = aiohttp.ClientSession()
            servers.close_later(session.close)
            reef = Reef(url_of(server), server, upstream, session)
            for kind in ("unclosed-tags", "compiler-errors", "prose"):
                rounds = [await one_round(reef, kind, options.chars, n) for n in range(options.rounds)]
                figures = {key: round(max(r[key] for r in rounds), 1) for key in rounds[0]}
                print(f"{kind} ({options.chars:,} characters), worst of {options.rounds}: {figures}")
    finally:
        await servers.close()


if __name__ == "__main__":
    asyncio.run(main())
