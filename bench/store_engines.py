"""The proxy on each store engine in one run: SQLite, PostgreSQL with one daemon, PostgreSQL with two daemons;
then `reef store copy` throughput, SQLite to PostgreSQL.

Starts the mock upstream (bench/mock_upstream.py), a throwaway PostgreSQL server (initdb in a temporary folder,
as tests/support/postgres.py does; fsync on, the server's defaults otherwise) and `reef serve` processes, all on
127.0.0.1 (one PostgreSQL daemon also through the server's Unix-domain socket, `postgresql://user@/db?host=DIR`:
"socket"), with the default commit wait (`--flush`: every daemon with `--store.flush on`). Latency: c=1,
non-streaming, interleaved blocks per target; "added" is a target's percentile minus the same percentile of the
mock called directly in the same run. Throughput: c=32 closed loop for a fixed window (the
two-daemon target splits its clients over both). Every receipt is checked to be listed afterwards.

    .venv/bin/python bench/store_engines.py [--requests 400] [--window-s 10] [--copy-records 20000] [--flush]
        [--baseline DIR]   # also PostgreSQL daemons of another checkout (git archive REV | tar -x -C DIR)
        [--no-two] [--no-socket] [--server-setting NAME=VALUE ...]   # a server setting: measure it both ways
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.postgres import running_server

ROOT = Path(__file__).resolve().parent.parent
CHAT = {"model": "mock", "messages": [{"role": "user", "content": "Say hello in one short sentence."}]}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serve(
    state: Path, upstream: str, store_url: str | None, log: Path, flush: bool = False, checkout: Path = ROOT
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [sys.executable, "-m", "reef_cli", "serve", "--reef.port", str(port), "--reef.state-dir", str(state),
               "--inference.upstream-url", upstream, "--store.flush", "on" if flush else "off"]  # fmt: skip
    if store_url:
        command += ["--store.url", store_url]
    env = {k: v for k, v in os.environ.items() if not k.startswith("REEF_")}
    process = subprocess.Popen(command, stdout=log.open("ab"), stderr=subprocess.STDOUT, env=env, cwd=checkout)
    return process, f"http://127.0.0.1:{port}"


async def ready(session: aiohttp.ClientSession, url: str) -> None:
    for _ in range(600):
        try:
            async with session.get(url + "/healthz") as response:
                if response.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} never answered")


async def one(session: aiohttp.ClientSession, url: str, receipts: list[str]) -> float:
    started = time.perf_counter()
    async with session.post(url + "/v1/chat/completions", json=CHAT, headers={"x-reef-scenario": "bench"}) as r:
        await r.read()
        assert r.status == 200, r.status
        if "x-reef-agent-record-id" in r.headers:
            receipts.append(r.headers["x-reef-agent-record-id"])
    return time.perf_counter() - started


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def latency(targets: dict[str, list[str]], requests: int, receipts: list[str]) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in targets}
    block = 20
    async with aiohttp.ClientSession() as session:
        for round_ in range(requests // block):
            names = list(targets)
            names = names[round_ % len(names) :] + names[: round_ % len(names)]
            for name in names:
                urls = targets[name]
                for n in range(block):
                    times[name].append(await one(session, urls[n % len(urls)], receipts))
    return times


async def throughput(urls: list[str], window_s: float, receipts: list[str]) -> float:
    done = 0
    stop = time.monotonic() + window_s
    connector = aiohttp.TCPConnector(limit=64)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def client(n: int) -> None:
            nonlocal done
            while time.monotonic() < stop:
                await one(session, urls[n % len(urls)], receipts)
                done += 1

        for _ in range(64):  # warm-up
            await one(session, urls[0], receipts)
        started = time.monotonic()
        await asyncio.gather(*(client(n) for n in range(32)))
        return done / (time.monotonic() - started)


async def listed(url: str) -> set[str]:
    found: set[str] = set()
    after = 0
    async with aiohttp.ClientSession() as session:
        while True:
            async with session.get(url + "/reef/records", params={"after": str(after), "limit": "500"}) as r:
                page = await r.json()
            if not page["records"]:
                return found
            found |= {row["id"] for row in page["records"]}
            after = page["next_after"]


def fill_sqlite(path: Path, records: int) -> None:
    """A SQLite store of `records` inference records of a realistic size (about 2 KiB of bodies each)."""
    import json

    from reef_daemon.store.engines.opening import open_engine
    from reef_daemon.store.engines.schema import migrate

    engine = open_engine(f"sqlite:{path}", path.parent)
    conn = engine.connect()
    migrate(conn, engine)
    request = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 1500}]}).encode()
    conn.execute("BEGIN")
    conn.execute(
        "INSERT INTO scenarios (name, recipe, training_mode, created_at) VALUES ('bench', 'record', 'auto', 0)"
    )
    conn.executemany(
        "INSERT INTO records (sequence, id, scenario, type, created_at, route, model, status, complete, request,"
        " response, answer) VALUES (?, ?, 'bench', 'inference', ?, '/v1/chat/completions', 'm', 200, 1, ?, ?, ?)",
        [
            (n, f"rec-{n:08d}", float(n), request, b'{"choices": []}', '{"role": "assistant"}')
            for n in range(1, records + 1)
        ],
    )
    conn.execute("COMMIT")
    conn.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--window-s", type=float, default=10.0)
    parser.add_argument("--copy-records", type=int, default=20000)
    parser.add_argument("--no-fsync", action="store_true", help="the server without fsync: what the WAL flush costs")
    parser.add_argument("--flush", action="store_true", help="every daemon with --store.flush on (commits on disk)")
    parser.add_argument(
        "--baseline", type=Path, help="a checkout of another revision: its PostgreSQL daemons too, interleaved"
    )
    parser.add_argument("--no-two", action="store_true", help="without the two-daemon targets")
    parser.add_argument("--no-socket", action="store_true", help="without the target on the Unix-domain socket")
    parser.add_argument(
        "--server-setting", action="append", default=[], metavar="NAME=VALUE",
        help="a postgresql.conf line for the throwaway server (repeatable), e.g. wal_writer_flush_after=0",
    )  # fmt: skip
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="reef-bench-store-"))
    processes: list[subprocess.Popen[bytes]] = []
    try:
        mock_port = free_port()
        processes.append(
            subprocess.Popen([sys.executable, str(ROOT / "bench" / "mock_upstream.py"), "--port", str(mock_port)])
        )
        upstream = f"http://127.0.0.1:{mock_port}"
        with running_server(fsync=not args.no_fsync, settings=args.server_setting) as server:
            flush = args.flush
            started = {"sqlite": [serve(work / "sqlite", upstream, None, work / "sqlite.log", flush)]}
            checkouts = {"": ROOT} | ({", baseline": args.baseline.resolve()} if args.baseline else {})
            for label, checkout in checkouts.items():
                one_url, two_url, tag = server.database(), server.database(), label.strip(", ")
                started[f"postgres, 1 daemon{label}"] = [
                    serve(work / f"pg1{tag}", upstream, one_url, work / f"pg1{tag}.log", flush, checkout)
                ]
                if not args.no_socket:  # the same, through the server's Unix-domain socket
                    socket_url = server.socket_url(server.database())
                    started[f"postgres, 1 daemon, socket{label}"] = [
                        serve(work / f"pgs{tag}", upstream, socket_url, work / f"pgs{tag}.log", flush, checkout)
                    ]
                if not args.no_two:
                    started[f"postgres, 2 daemons{label}"] = [
                        serve(work / f"pg2{tag}-{n}", upstream, two_url, work / f"pg2{tag}-{n}.log", flush, checkout)
                        for n in range(2)
                    ]
            targets = {"direct": [upstream]} | {name: [url for _p, url in pair] for name, pair in started.items()}
            processes += [p for pair in started.values() for p, _url in pair]
            async with aiohttp.ClientSession() as session:
                for name, urls in targets.items():
                    for url in urls if name != "direct" else ():
                        await ready(session, url)
            receipts: dict[str, list[str]] = {name: [] for name in targets}
            every: list[str] = []
            times = await latency(targets, args.requests, every)
            rates = {}
            for name, urls in targets.items():
                rates[name] = await throughput(urls, args.window_s, receipts[name])
            base50, base99 = percentile(times["direct"], 0.5), percentile(times["direct"], 0.99)
            print(f"{args.requests} requests per target at c=1, interleaved; c=32 for {args.window_s:g} s\n")
            print("| target | added p50 | added p99 | req/s at c=32 |")
            print("|---|---|---|---|")
            for name in targets:
                p50, p99 = percentile(times[name], 0.5), percentile(times[name], 0.99)
                added = "—" if name == "direct" else f"{(p50 - base50) * 1000:.2f} ms"
                added99 = "—" if name == "direct" else f"{(p99 - base99) * 1000:.2f} ms"
                print(f"| {name} | {added} | {added99} | {rates[name]:.0f} |")
            for name, urls in targets.items():
                if name == "direct":
                    continue
                found = await listed(urls[0])
                lost = [r for r in receipts[name] if r not in found]
                print(f"\n{name}: {len(receipts[name])} receipts at c=32, {len(lost)} not listed", end="")
            print()
            if not args.copy_records:
                return

            source = work / "copy" / "reef.sqlite3"
            source.parent.mkdir()
            fill_sqlite(source, args.copy_records)
            destination = server.database()
            from reef_daemon.store.engines.copy import copy_store

            started_at = time.perf_counter()
            copy_store(f"sqlite:{source}", destination)
            seconds = time.perf_counter() - started_at
            again_at = time.perf_counter()
            copy_store(f"sqlite:{source}", destination)
            again = time.perf_counter() - again_at
            size = source.stat().st_size / 1024 / 1024
            print(
                f"\nreef store copy, {args.copy_records} records ({size:.0f} MiB SQLite) to PostgreSQL: {seconds:.1f} s"
                f" ({args.copy_records / seconds:.0f} records/s); run again (nothing to add): {again:.1f} s"
            )
            back = work / "back" / "reef.sqlite3"
            back_at = time.perf_counter()
            copy_store(destination, f"sqlite:{back}")
            back_s = time.perf_counter() - back_at
            print(f"and back to SQLite: {back_s:.1f} s ({args.copy_records / back_s:.0f} records/s)")
            for process in processes:
                process.terminate()
            for process in processes:
                process.wait(30)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
