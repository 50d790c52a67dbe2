"""Several `reef serve` processes on one PostgreSQL store: records made on either are listed on both, events from
both reach a subscriber of either, a scenario's worker runs on one daemon and moves to the other when that one is
killed (the next unit trains exactly once), kill -9 under load loses no acknowledged receipt, and a database that
stops under load makes requests fail with a clear 503 and recover by themselves."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
import pytest

from reef_daemon.store import Store
from reef_daemon.store.engines.writer import WriteContext
from tests.support.daemon_process import DaemonProcess
from tests.support.postgres import PostgresServer
from tests.support.reef_testing import CHAT, Reef, StartReef
from tests.support.waiting import eventually

RECIPE = "tests.support.counting_recipe:CountingRecipe"


TwoDaemons = Callable[..., tuple[DaemonProcess, DaemonProcess]]


@pytest.fixture
def two_daemons(tmp_path: Path, upstream: str) -> Iterator[TwoDaemons]:
    """Starts two `reef serve` processes on one store URL; stops every one started when the test ends, however."""
    started: list[DaemonProcess] = []

    def start(url: str, recipe: str = "record") -> tuple[DaemonProcess, DaemonProcess]:
        for name in ("a", "b"):
            config = tmp_path / f"{name}.yaml"
            config.write_text(
                f"recipe: {recipe}\nreef:\n  state-dir: {tmp_path / name}\ninference:\n  upstream-url: {upstream}\n"
                f"store:\n  url: {url}\n"
            )
            started.append(DaemonProcess(config, tmp_path / f"{name}.log"))
        return started[-2], started[-1]

    yield start
    for daemon in started:
        try:
            daemon.stop()
        except subprocess.TimeoutExpired:
            daemon.stop(signal.SIGKILL)


async def receipt(session: aiohttp.ClientSession, daemon: DaemonProcess) -> str:
    async with session.post(daemon.url + "/v1/chat/completions", json=CHAT, headers={"x-reef-scenario": "demo"}) as r:
        assert r.status == 200, await r.text()
        return r.headers["x-reef-agent-record-id"]


async def report(session: aiohttp.ClientSession, daemon: DaemonProcess, reference: str) -> str:
    body = {"score": 1, "references": [reference]}
    async with session.post(daemon.url + "/reef/report", json=body, headers={"x-reef-scenario": "demo"}) as r:
        assert r.status == 200, await r.text()
        return str((await r.json())["agent_record_id"])


async def training(session: aiohttp.ClientSession, daemon: DaemonProcess) -> dict[str, Any]:
    async with session.get(daemon.url + "/reef/status") as response:
        status = await response.json()
    return dict(status["training"]["scenarios"].get("demo", {}))


async def listed(session: aiohttp.ClientSession, daemon: DaemonProcess) -> set[str]:
    async with session.get(daemon.url + "/reef/records", params={"limit": "500"}) as response:
        return {row["id"] for row in (await response.json())["records"]}


async def follow_events(session: aiohttp.ClientSession, daemon: DaemonProcess, seen: list[dict[str, Any]]) -> None:
    async with session.get(daemon.url + "/reef/events", timeout=aiohttp.ClientTimeout(total=None)) as response:
        async for line in response.content:
            if line.startswith(b"data: "):
                seen.append(json.loads(line[6:]))


def consumed(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [record for (step,) in conn.execute("SELECT consumed FROM steps") for record in json.loads(step)]


@pytest.fixture
def shared_url(postgres_server: PostgresServer) -> str:
    return postgres_server.database()


async def answers_again_and_kept_every_answer(reef: Reef, acknowledged: list[str]) -> None:
    """Once the server is back, requests succeed again and every answer acknowledged before is stored."""

    async def answered() -> int:
        response = await reef.post("/v1/chat/completions", CHAT)
        if response.status == 200:
            acknowledged.append(response.headers["x-reef-agent-record-id"])
        return response.status

    await eventually(answered, 30, "requests to succeed again", satisfied=lambda status: status == 200)
    stored = {row["id"] for row in await reef.records(limit="500")}
    assert set(acknowledged) <= stored


async def test_two_daemons_serve_one_deployment(two_daemons: TwoDaemons, shared_url: str) -> None:
    first, second = two_daemons(shared_url, RECIPE)
    async with aiohttp.ClientSession() as session:
        await first.ready(session)
        await second.ready(session)
        events: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
        followers = [
            asyncio.create_task(follow_events(session, daemon, events[name]))
            for name, daemon in (("a", first), ("b", second))
        ]
        try:
            made = {await receipt(session, first), await receipt(session, second)}
            for daemon in (first, second):  # records made on either are listed on both
                assert made <= await listed(session, daemon)

            def record_events(name: str) -> set[str]:
                return {e["record"]["id"] for e in events[name] if e.get("record")}

            for name in ("a", "b"):  # and each subscriber hears both daemons' records
                await eventually(lambda n=name: made <= record_events(n), 30, f"both records on {name}'s events")

            # One daemon runs the scenario's worker; a report sent to either trains there.
            receipts = [await receipt(session, first) for _ in range(4)]
            reports = [await report(session, second, r) for r in receipts[:2]]
            states: dict[str, dict[str, Any]] = {}

            async def holder() -> DaemonProcess | None:
                for daemon in (first, second):
                    states[daemon.url] = await training(session, daemon)
                runs = [d for d in (first, second) if states[d.url].get("runs_here")]
                # Both read the step: the other daemon's count may be read before the step commits.
                stepped = all(state.get("steps") == 1 for state in states.values())
                return runs[0] if len(runs) == 1 and stepped else None

            held = await eventually(holder, 30, "one daemon to run the first step", satisfied=lambda d: d is not None)
            assert held is not None
            other = second if held is first else first
            assert not states[other.url]["runs_here"]

            # kill -9 the worker's daemon: the other takes the worker over and trains the next unit exactly once.
            reports.append(await report(session, other, receipts[2]))  # waits for a partner unit
            held.stop(signal.SIGKILL)
            await eventually(
                lambda: training(session, other), 30, "the worker to move", satisfied=lambda s: s.get("runs_here")
            )
            reports.append(await report(session, other, receipts[3]))
            await eventually(lambda: training(session, other), 30, "the next step", satisfied=lambda s: s["steps"] == 2)
            trained = consumed(shared_url)
            assert sorted(trained) == sorted(reports)  # every unit once: none twice, none skipped
        finally:
            for task in followers:
                task.cancel()
            await asyncio.gather(*followers, return_exceptions=True)


async def test_a_recipe_that_keeps_releases_does_not_fork_their_history(
    tmp_path: Path, two_daemons: TwoDaemons, shared_url: str
) -> None:
    """Its releases are under the state directory of the daemon that trained first: the other daemon, with a
    state directory of its own, does not take the scenario over when that daemon dies, and says why."""
    first, second = two_daemons(shared_url, "tests.support.counting_recipe:ReleasingRecipe")
    async with aiohttp.ClientSession() as session:
        await first.ready(session)
        await second.ready(session)
        receipts = [await receipt(session, first) for _ in range(2)]
        for r in receipts:
            await report(session, first, r)

        async def holder() -> DaemonProcess | None:
            for daemon in (first, second):
                state = await training(session, daemon)
                if state.get("runs_here") and state.get("steps") == 1:
                    return daemon
            return None

        held = await eventually(holder, 30, "a first step", satisfied=lambda d: d is not None)
        assert held is not None
        other = second if held is first else first
        held.stop(signal.SIGKILL)
        state = await eventually(
            lambda: training(session, other), 30, "the refusal", satisfied=lambda s: s.get("error") is not None
        )
        assert (
            "releases are kept at" in state["error"]
            and str(tmp_path / ("a" if held is first else "b")) in state["error"]
        )
        assert not state["runs_here"] and state["steps"] == 1


async def test_kill_9_under_load_across_two_daemons_loses_no_receipt(two_daemons: TwoDaemons, shared_url: str) -> None:
    daemons = two_daemons(shared_url)
    receipts: list[str] = []
    stop = asyncio.Event()

    async def client(session: aiohttp.ClientSession, number: int) -> None:
        daemon = daemons[number % 2]
        while not stop.is_set():
            try:
                async with session.post(
                    daemon.url + "/v1/chat/completions", json=CHAT, headers={"x-reef-scenario": f"load-{number % 3}"}
                ) as response:
                    if response.status == 200:
                        receipts.append(response.headers["x-reef-agent-record-id"])
            except (TimeoutError, aiohttp.ClientError):
                if daemon.process.poll() is not None:
                    return

    async with aiohttp.ClientSession() as session:
        for daemon in daemons:
            await daemon.ready(session)
        clients = [asyncio.create_task(client(session, n)) for n in range(16)]
        await eventually(lambda: len(receipts) >= 300, 120, "300 receipts under load")
        daemons[0].stop(signal.SIGKILL)  # kill -9 one daemon while its requests are in flight; the other serves on
        count = len(receipts)
        await eventually(lambda: len(receipts) >= count + 50, 60, "the surviving daemon to go on")
        stop.set()
        await asyncio.gather(*clients)
        stored = await listed_all(session, daemons[1])
    missing = [r for r in receipts if r not in stored]
    assert missing == [], f"{len(missing)} of {len(receipts)} acknowledged records were lost"


async def listed_all(session: aiohttp.ClientSession, daemon: DaemonProcess) -> set[str]:
    found: set[str] = set()
    after = 0
    while True:
        params = {"after": str(after), "limit": "500"}
        async with session.get(daemon.url + "/reef/records", params=params) as response:
            page = await response.json()
        if not page["records"]:
            return found
        found |= {row["id"] for row in page["records"]}
        after = page["next_after"]


async def test_a_stopped_database_gives_clear_503s_and_recovery(
    start_reef: StartReef, postgres_server: PostgresServer
) -> None:
    reef = await start_reef(store__url=postgres_server.database())
    acknowledged = [(await reef.post("/v1/chat/completions", CHAT)).headers["x-reef-agent-record-id"]]
    await asyncio.to_thread(postgres_server.stop)
    try:
        down = await reef.post("/v1/chat/completions", CHAT)
        assert down.status == 503
        error = (await down.json())["error"]
        assert error["type"] == "store_failed" and "unreachable" in error["message"], error
        listing = await reef.get("/reef/records")
        assert listing.status == 503 and "unreachable" in (await listing.json())["error"]["message"]
    finally:
        await asyncio.to_thread(postgres_server.start)

    await answers_again_and_kept_every_answer(reef, acknowledged)


async def test_a_database_server_that_stops_answering_gives_503s_and_recovery(
    start_reef: StartReef, postgres_server: PostgresServer
) -> None:
    """kill -STOP on the server: its connections stay open and nothing answers on them. Requests wait no longer than
    store.timeout-s, then fail with a 503 that says so; once the server goes on, so do they."""
    reef = await start_reef(store__url=postgres_server.database(), store__timeout_s="2")
    acknowledged = [(await reef.post("/v1/chat/completions", CHAT)).headers["x-reef-agent-record-id"]]
    bounded = aiohttp.ClientTimeout(total=120)  # far beyond store.timeout-s: only a request that hangs reaches it
    postgres_server.signal(signal.SIGSTOP)
    try:
        headers = {"x-reef-scenario": "demo"}
        async with reef.session.post(
            reef.url + "/v1/chat/completions", json=CHAT, headers=headers, timeout=bounded
        ) as down:
            error = (await down.json())["error"]
            assert down.status == 503 and error["type"] == "store_failed", error
            assert "did not answer within 2 s (store.timeout-s)" in error["message"], error
        async with reef.session.get(reef.url + "/reef/records", timeout=bounded) as listing:
            assert listing.status == 503 and "store.timeout-s" in (await listing.json())["error"]["message"]
    finally:
        postgres_server.signal(signal.SIGCONT)

    await answers_again_and_kept_every_answer(reef, acknowledged)


async def test_a_statement_longer_than_the_timeout_is_waited_for_while_the_server_answers(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    """store.timeout-s gives up on a server that stopped answering, not on one working on a long statement (a
    migration's index, a count over every record): it lets a new connection in, so the statement is waited for."""
    store = Store(tmp_path, lambda _events: None, score_scale={"min": 0.0, "max": 1.0}, url=postgres_server.database(),
                  answer_wait_s=1.0)  # fmt: skip
    store.open(asyncio.get_running_loop())
    try:
        slept = await store.reader.run(lambda conn: conn.execute("SELECT 1 AS slept FROM pg_sleep(3)").fetchone())
        assert slept["slept"]

        def write(ctx: WriteContext) -> bool:
            return bool(ctx.conn.execute("SELECT 1 AS slept FROM pg_sleep(3)").fetchone()["slept"])

        assert await store.writer.submit(write)
    finally:
        await asyncio.to_thread(store.close)


@pytest.fixture
async def upstream() -> AsyncIterator[str]:
    from aiohttp.test_utils import TestServer

    from tests.support.fake_upstream import FakeUpstream

    server = TestServer(FakeUpstream(delay_ms=2).app(), host="127.0.0.1")
    await server.start_server()
    yield str(server.make_url("")).rstrip("/")
    await server.close()
