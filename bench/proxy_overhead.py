"""Proxy overhead benchmark: direct vs floor-b vs reef vs LiteLLM, interleaved in one run.

A cheap raw client (asyncio Protocol + httptools on uvloop, pre-built request bytes, one keep-alive connection
per worker) drives every target in the same process, so its own cost cancels in "added" figures, which are a
target's percentile minus the same percentile of `direct` (client -> mock, no proxy) in the same run. Targets
are interleaved: each round runs one block on every target, the order rotating by one each round.

Phases:
  lat     c=1, non-streaming: latency per request, proxy CPU per request.
  stream  c=1, "stream": true: time to the first body byte (the first SSE chunk) and to the end of the stream.
  tput    c=32 closed loop, non-streaming: requests/s in fixed windows after a warm-up.
  soak    reef only, c=16 (every 4th request a stream), sampling reef's RSS from /proc every second.
  verify  every receipt reef handed out is listed by GET /reef/records (and counted in its SQLite file).

How each figure is measured:
  c=1 added p50 / p99: one connection, one request at a time, non-streaming; full run: 300 warm-up requests per
    target, then 25 rounds x 100 requests (LiteLLM: x 50, it costs ~10-25 ms each). Time from writing the
    request to the last byte of the answer.
  c=1 proxy CPU per request: the proxy process's user+system CPU (all threads, from `/proc/PID/stat`) over the
    c=1 blocks, divided by the requests. 10 ms clock ticks: read to ±10 %.
  stream added TTFT: `"stream": true`, c=1, 15 rounds x 100: time to the first body byte, i.e. the first SSE
    chunk (not the headers, which reef sends before it). "Total" is to the end of the chunked body, receipt
    chunk included. CPU per stream: the proxy's CPU over these blocks, as for c=1.
  throughput c=32: 32 connections in a closed loop, non-streaming; 2 s warm-up, then a 10 s window; 4 rounds per
    target, the order rotating; the median window, so one
    slow window of a drifting machine does not move the figure. Latency under load and CPU per request
    come from the same windows.
  soak: reef alone, 16 connections in a closed loop, every 4th request a stream, for `--soak-s` seconds (300 in
    a full run). reef's RSS (`VmRSS` of `/proc/PID/status`) is sampled every second; growth = last sample vs
    first. The first/last tenth req/s shows whether throughput decays as the store grows.
  records lost: every receipt reef handed out (`x-reef-agent-record-id` header; for streams
    `reef.agent_record_id` in the last chunk), across all phases, is looked up in the records paged from `GET
    /reef/records?limit=500&after=N` and in reef's SQLite file (read-only). Lost = receipts missing from either
    + 200 answers without a receipt. The store holds one record more than the receipts: run.sh's readiness
    probe.
  foreign load: cores busy with processes other than the benchmark's own (from `/proc/stat` minus our processes'
    CPU), per block.
  reef+busy (with --otel): reef again at c=32, with a busy loop at the lowest priority on the client's core during
    its windows, where reef+otel's export process runs: what any work on that core costs reef's throughput, export
    or not. (At c=1 the loop would keep that core from idling, which makes the client answer faster: not measured.)

Only 127.0.0.1 is ever contacted. Every loop is bounded in count and in time. Usually started by run.sh:

    python bench/proxy_overhead.py --direct 18000 --floor 18001:PID --reef 18002:PID [--litellm 18003:PID]
        --mock-pid PID --out bench/results/run.json [--quick] [--soak-s 300]
    python bench/proxy_overhead.py --render bench/results/run.json     # the markdown table again
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import httptools
import uvloop
from report import render

HOST = "127.0.0.1"
ROUTE = "/v1/chat/completions"
SCENARIO = "bench"
RECEIPT_HEADER = b"x-reef-agent-record-id"
RECEIPT_MARK = b'"agent_record_id":"'
REQUEST_TIMEOUT_S = 60.0
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = 500


# ---------------------------------------------------------------------------------------------------------
# The client


PASS_TOKEN = "bench-reef-token"  # the reef+pass and reef+token targets' REEF_TOKEN (bench/run.sh --pass-through)
PASS_OWN_KEY = "bench-client-own-key"


def build_request(port: int, *, stream: bool, headers: str = "") -> bytes:
    payload: dict[str, Any] = {
        "model": "mock",
        "messages": [{"role": "user", "content": "Say hello in one short sentence."}],
        "max_tokens": 32,
    }
    if stream:
        payload["stream"] = True
    body = json.dumps(payload, separators=(",", ":")).encode()
    head = (
        f"POST {ROUTE} HTTP/1.1\r\nHost: {HOST}:{port}\r\ncontent-type: application/json\r\n"
        f"x-reef-scenario: {SCENARIO}\r\n{headers}content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def build_get(port: int, path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\naccept: application/json\r\n\r\n".encode()


@dataclass
class Outcome:
    ok: bool
    start: float
    first_byte: float
    end: float
    receipt: str | None
    body: bytes = b""

    @property
    def total_ms(self) -> float:
        return (self.end - self.start) * 1000

    @property
    def ttfb_ms(self) -> float:
        return (self.first_byte - self.start) * 1000


class HttpConnection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; one request at a time. Times come from when bytes reach Python."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[None] | None = None
        self._now = 0.0
        self._first_byte = 0.0
        self._end = 0.0
        self._receipt: str | None = None
        self._keep_body = False
        self._body: list[bytes] = []
        self.closed = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass it

    def data_received(self, data: bytes) -> None:
        self._now = time.perf_counter()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(exc or ConnectionResetError("the server closed the connection"))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == RECEIPT_HEADER:
            self._receipt = value.decode()

    def on_body(self, body: bytes) -> None:
        if not self._first_byte:
            self._first_byte = self._now
        if self._keep_body:
            self._body.append(body)

    def on_message_complete(self) -> None:
        self._end = self._now
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _fail(self, exc: BaseException) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    async def exchange(self, request: bytes, *, keep_body: bool) -> Outcome:
        if self.closed or self._transport is None:
            raise ConnectionResetError("connection closed")
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        self._first_byte = self._end = 0.0
        self._receipt = None
        self._keep_body = keep_body
        self._body = []
        timer = loop.call_later(REQUEST_TIMEOUT_S, self._fail, TimeoutError("no answer in time"))
        start = time.perf_counter()
        self._transport.write(request)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None
        status = self._parser.get_status_code()
        body = b"".join(self._body)
        first = self._first_byte or self._end
        return Outcome(status == 200, start, first, self._end, self._receipt, body)


async def connect(port: int) -> HttpConnection:
    loop = asyncio.get_running_loop()
    _, protocol = await asyncio.wait_for(loop.create_connection(HttpConnection, HOST, port), 10)
    return protocol


def stream_receipt(body: bytes) -> str | None:
    at = body.rfind(RECEIPT_MARK)
    if at < 0:
        return None
    start = at + len(RECEIPT_MARK)
    end = body.find(b'"', start)
    return body[start:end].decode() if end > start else None


def stream_complete(body: bytes) -> bool:
    """20 chunks from the mock (LiteLLM may add some) and the terminal event."""
    return body.count(b"data:") >= 21 and b"data: [DONE]" in body


# ---------------------------------------------------------------------------------------------------------
# /proc sampling


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def machine_busy_s() -> float:
    """CPU seconds all cores have spent busy since boot."""
    parts = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in parts[:8])
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


@dataclass
class CpuSnapshot:
    wall: float
    busy: float
    per_pid: dict[int, float]


class CpuMeter:
    """CPU used by each of our processes, and by everything else on the machine ("foreign" load)."""

    def __init__(self, pids: Iterable[int]) -> None:
        self.pids = sorted(set(pids) | {os.getpid()})

    def snapshot(self) -> CpuSnapshot:
        return CpuSnapshot(time.perf_counter(), machine_busy_s(), {pid: proc_cpu_s(pid) for pid in self.pids})

    def since(self, before: CpuSnapshot) -> tuple[dict[int, float], float]:
        """(CPU seconds per pid, foreign cores on average) since `before`."""
        now = self.snapshot()
        used = {pid: now.per_pid[pid] - before.per_pid[pid] for pid in self.pids}
        wall = max(now.wall - before.wall, 1e-9)
        foreign = max(0.0, (now.busy - before.busy) - sum(used.values())) / wall
        return used, foreign


# ---------------------------------------------------------------------------------------------------------
# Targets and settings


class Neighbour:
    """A busy loop at the lowest priority on the client's core (it inherits the client's CPU affinity), stopped
    except while a `busy_neighbour` target's throughput is measured: the control for work on that core, such as
    reef's export process."""

    def __init__(self) -> None:
        code = "import os\nos.nice(19)\nwhile True:\n    pass"
        self._process = subprocess.Popen([sys.executable, "-c", code])
        self._process.send_signal(signal.SIGSTOP)
        self.pid = self._process.pid

    @contextmanager
    def busy(self, on: bool) -> Iterator[None]:
        if not on:
            yield
            return
        self._process.send_signal(signal.SIGCONT)
        try:
            yield
        finally:
            self._process.send_signal(signal.SIGSTOP)

    def close(self) -> None:
        self._process.kill()
        self._process.wait()


@dataclass
class Target:
    name: str
    port: int
    pid: int | None  # the proxy process (None for direct)
    headers: str = ""  # more request header lines, each ending in CRLF
    busy_neighbour: bool = False  # measured at c=32 only, with `Neighbour` busy
    request: bytes = b""
    stream_request: bytes = b""

    def __post_init__(self) -> None:
        self.request = build_request(self.port, stream=False, headers=self.headers)
        self.stream_request = build_request(self.port, stream=True, headers=self.headers)


@dataclass
class Settings:
    warm: int
    lat_rounds: int
    lat_block: int
    stream_rounds: int
    stream_block: int
    tput_rounds: int
    tput_warm_s: float
    tput_window_s: float
    tput_concurrency: int
    soak_s: float
    soak_concurrency: int
    # LiteLLM costs ~25 ms per request: it gets smaller c=1 blocks so the run length stays sane
    slow_block_divisor: int

    @classmethod
    def full(cls) -> Settings:
        return cls(300, 25, 100, 15, 100, 4, 2.0, 10.0, 32, 300.0, 16, 2)

    @classmethod
    def quick(cls) -> Settings:
        return cls(30, 5, 40, 4, 30, 1, 1.0, 4.0, 32, 15.0, 16, 2)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "mean": statistics.fmean(values) if values else float("nan"),
    }


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _rate(samples: list[tuple[float, float, int]]) -> float:
    """Completions per second between the first and the last of (seconds, RSS, completions) samples."""
    if len(samples) < 2:
        return float("nan")
    return (samples[-1][2] - samples[0][2]) / max(samples[-1][0] - samples[0][0], 1e-9)


# ---------------------------------------------------------------------------------------------------------
# The benchmark


@dataclass
class Tally:
    """What reef handed out, to check against its store at the end."""

    receipts: set[str] = field(default_factory=set)
    answered: int = 0
    without_receipt: int = 0


class Bench:
    def __init__(self, targets: list[Target], settings: Settings, meter: CpuMeter, neighbour: Neighbour) -> None:
        self.targets = targets
        self.settings = settings
        self.meter = meter
        self.neighbour = neighbour
        self.reef_port = next(t.port for t in targets if t.name == "reef")
        self.tally = Tally()
        self.errors: dict[str, dict[str, int]] = {t.name: {} for t in targets}

    def _error(self, target: Target, phase: str) -> None:
        self.errors[target.name][phase] = self.errors[target.name].get(phase, 0) + 1

    def _check(self, target: Target, outcome: Outcome, *, stream: bool, phase: str) -> bool:
        ok = outcome.ok and (stream_complete(outcome.body) if stream else outcome.end > 0)
        if not ok:
            self._error(target, phase)
        if target.port == self.reef_port and outcome.ok:  # reef, or a control sending to it: its store holds them
            self.tally.answered += 1
            receipt = stream_receipt(outcome.body) if stream else outcome.receipt
            if receipt is None:
                self.tally.without_receipt += 1
            else:
                self.tally.receipts.add(receipt)
        return ok

    async def _one(self, target: Target, conn: HttpConnection, *, stream: bool, phase: str) -> Outcome | None:
        request = target.stream_request if stream else target.request
        try:
            outcome = await conn.exchange(request, keep_body=stream)
        except (OSError, TimeoutError, httptools.HttpParserError):
            self._error(target, phase)
            return None
        return outcome if self._check(target, outcome, stream=stream, phase=phase) else None

    def _block_size(self, target: Target, block: int) -> int:
        return max(1, block // self.settings.slow_block_divisor) if target.name == "litellm" else block

    def _rotation(self, round_index: int, targets: list[Target] | None = None) -> list[Target]:
        among = self.targets if targets is None else targets
        shift = round_index % len(among)
        return among[shift:] + among[:shift]

    async def warm_up(self) -> None:
        for target in (t for t in self.targets if not t.busy_neighbour):  # a control reuses another's process
            conn = await connect(target.port)
            count = self._block_size(target, self.settings.warm)
            for i in range(count):
                await self._one(target, conn, stream=i % 4 == 3, phase="warm")
            conn.close()
        log("warm-up done")

    async def sequential(self, *, stream: bool) -> dict[str, Any]:
        """c=1 rounds; returns per-target latency (or TTFB and total) and proxy CPU per request."""
        s = self.settings
        rounds, block = (s.stream_rounds, s.stream_block) if stream else (s.lat_rounds, s.lat_block)
        phase = "stream" if stream else "lat"
        targets = [t for t in self.targets if not t.busy_neighbour]  # that control is for throughput only
        conns = {t.name: await connect(t.port) for t in targets}
        totals: dict[str, list[float]] = {t.name: [] for t in targets}
        ttfbs: dict[str, list[float]] = {t.name: [] for t in targets}
        cpu_s: dict[str, float] = {t.name: 0.0 for t in targets}
        foreign: list[float] = []
        deadline = time.perf_counter() + 1800
        for r in range(rounds):
            for target in self._rotation(r, targets):
                before = self.meter.snapshot()
                for _ in range(self._block_size(target, block)):
                    if conns[target.name].closed:
                        conns[target.name] = await connect(target.port)
                    outcome = await self._one(target, conns[target.name], stream=stream, phase=phase)
                    if outcome is not None:
                        totals[target.name].append(outcome.total_ms)
                        ttfbs[target.name].append(outcome.ttfb_ms)
                used, foreign_cores = self.meter.since(before)
                foreign.append(foreign_cores)
                if target.pid is not None:
                    cpu_s[target.name] += used[target.pid]
            log(f"{phase}: round {r + 1}/{rounds}")
            if time.perf_counter() > deadline:
                log(f"{phase}: stopping after round {r + 1}, over the time bound")
                break
        for conn in conns.values():
            conn.close()
        result: dict[str, Any] = {"foreign_cores": summary(foreign)}
        for target in targets:
            done = len(totals[target.name])
            entry: dict[str, Any] = {"total_ms": summary(totals[target.name])}
            if stream:
                entry["ttfb_ms"] = summary(ttfbs[target.name])
            if target.pid is not None and done:
                entry["cpu_us_per_request"] = cpu_s[target.name] / done * 1e6
            result[target.name] = entry
        return result

    async def _load(
        self,
        target: Target,
        concurrency: int,
        warm_s: float,
        window_s: float,
        *,
        stream_every: int,
        phase: str,
        watch: Callable[[float, list[int]], Awaitable[None]] | None = None,
    ) -> dict[str, Any]:
        """Closed loop at `concurrency`; counts the requests that complete inside the window after warm-up.

        `watch(window_end, progress)` replaces the plain wait for the window's end (the soak samples RSS).
        """
        conns = [await connect(target.port) for _ in range(concurrency)]
        started = time.perf_counter()
        window_start, window_end = started + warm_s, started + warm_s + window_s
        latencies: list[float] = []
        progress = [0]  # completions so far, sampled by the soak
        most = int((warm_s + window_s) * 50_000)  # per worker; far above what one core can serve

        async def worker(index: int) -> None:
            conn = conns[index]
            for n in range(1, most + 1):
                if time.perf_counter() >= window_end:
                    break
                if conn.closed:
                    conn = await connect(target.port)
                stream = stream_every > 0 and (n + index) % stream_every == 0
                outcome = await self._one(target, conn, stream=stream, phase=phase)
                if outcome is not None and window_start <= outcome.end <= window_end:
                    latencies.append(outcome.total_ms)
                    progress[0] += 1
            conn.close()

        workers = [asyncio.create_task(worker(i)) for i in range(concurrency)]
        await asyncio.sleep(max(0.0, window_start - time.perf_counter()))
        before = self.meter.snapshot()
        if watch is None:
            await asyncio.sleep(max(0.0, window_end - time.perf_counter()))
        else:
            await watch(window_end, progress)
        used, foreign = self.meter.since(before)
        async with asyncio.timeout(REQUEST_TIMEOUT_S + 5):
            await asyncio.gather(*workers)
        done = len(latencies)
        entry: dict[str, Any] = {
            "requests": done,
            "req_per_s": done / window_s,
            "latency_ms": summary(latencies),
            "foreign_cores": foreign,
        }
        if target.pid is not None and done:
            entry["cpu_us_per_request"] = used[target.pid] / done * 1e6
            entry["proxy_cpu_share"] = used[target.pid] / window_s
        return entry

    async def throughput(self) -> dict[str, Any]:
        s = self.settings
        windows: dict[str, list[dict[str, Any]]] = {t.name: [] for t in self.targets}
        for r in range(s.tput_rounds):
            for target in self._rotation(r):
                with self.neighbour.busy(target.busy_neighbour):
                    entry = await self._load(
                        target, s.tput_concurrency, s.tput_warm_s, s.tput_window_s, stream_every=0, phase="tput"
                    )
                windows[target.name].append(entry)
                log(f"tput: {target.name} {entry['req_per_s']:.0f} req/s (round {r + 1}/{s.tput_rounds})")
        result: dict[str, Any] = {}
        for target in self.targets:
            entries = windows[target.name]
            result[target.name] = {
                "req_per_s": statistics.median(e["req_per_s"] for e in entries),
                "windows": entries,
            }
        return result

    async def soak(self, reef: Target) -> dict[str, Any]:
        s = self.settings
        assert reef.pid is not None
        samples: list[tuple[float, float, int]] = []  # (seconds into the soak, RSS MB, completions)
        soak_start = time.perf_counter()

        async def sample_rss(window_end: float, progress: list[int]) -> None:
            for _ in range(int(s.soak_s) + 10):
                samples.append((time.perf_counter() - soak_start, proc_rss_mb(reef.pid or 0), progress[0]))
                left = window_end - time.perf_counter()
                if left <= 0:
                    break
                await asyncio.sleep(min(1.0, left))

        entry = await self._load(
            reef, s.soak_concurrency, 0.0, s.soak_s, stream_every=4, phase="soak", watch=sample_rss
        )
        rss = [mb for _, mb, _ in samples]
        first, last = rss[0], rss[-1]
        middle = rss[len(rss) // 2]
        early = [x for x in samples if x[0] <= 0.1 * s.soak_s + 0.5]
        late = [x for x in samples if x[0] >= 0.9 * s.soak_s - 0.5]
        entry.update(
            req_per_s_first_tenth=_rate(early),
            req_per_s_last_tenth=_rate(late),
            seconds=s.soak_s,
            rss_start_mb=first,
            rss_end_mb=last,
            rss_max_mb=max(rss),
            rss_growth_pct=(last - first) / first * 100 if first else float("nan"),
            rss_growth_second_half_pct=(last - middle) / middle * 100 if middle else float("nan"),
            rss_samples=[(round(t, 1), round(mb, 2), n) for t, mb, n in samples[:: max(1, len(samples) // 60)]],
        )
        log(f"soak: {entry['req_per_s']:.0f} req/s, RSS {first:.1f} -> {last:.1f} MB")
        return entry

    async def _get_json(self, conn: HttpConnection, port: int, path: str) -> Any:
        outcome = await conn.exchange(build_get(port, path), keep_body=True)
        if not outcome.ok:
            raise RuntimeError(f"GET {path} failed: {outcome.body[:200]!r}")
        return json.loads(outcome.body)

    async def spans(self, target: Target, quiet_s: float = 7.0, bound_s: float = 60.0) -> dict[str, int]:
        """What the exporting reef's `telemetry` says once its counts have not moved for `quiet_s` (longer than the
        SDK's 5 s batch delay: the export caught up or gave up), bounded by `bound_s`: spans exported, failed and
        dropped, running totals."""
        conn = await connect(target.port)
        said: dict[str, int] = {}
        began = moved = time.perf_counter()
        while time.perf_counter() - began < bound_s and time.perf_counter() - moved < quiet_s:
            telemetry = (await self._get_json(conn, target.port, "/reef/status")).get("telemetry") or {}
            now = {name: int(telemetry.get(name, 0)) for name in ("exported", "failed", "dropped")}
            if now != said:
                said, moved = now, time.perf_counter()
            await asyncio.sleep(1.0)
        conn.close()
        return said

    async def verify(self, reef: Target, floor: Target | None) -> dict[str, Any]:
        """Every receipt reef handed out must be a stored record: listed by the API and in the SQLite file."""
        conn = await connect(reef.port)
        listed: set[str] = set()
        after = 0
        answered = self.tally.answered + sum(self.errors["reef"].values())
        max_pages = answered // PAGE_SIZE + 100
        deadline = time.perf_counter() + 600
        pages = 0
        for pages in range(1, max_pages + 1):  # noqa: B007 - pages is reported
            page = await self._get_json(conn, reef.port, f"/reef/records?limit={PAGE_SIZE}&after={after}")
            records = page["records"]
            if not records or time.perf_counter() > deadline:
                break
            listed.update(r["id"] for r in records if r.get("type") == "inference")
            after = page["next_after"]
        status = await self._get_json(conn, reef.port, "/reef/status")
        conn.close()
        store = status.get("store", {})
        in_sqlite: set[str] = set()
        db_path = store.get("path")
        if db_path and Path(db_path).exists():
            with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as db:
                in_sqlite = {row[0] for row in db.execute("SELECT id FROM records WHERE type = 'inference'")}
        receipts = self.tally.receipts
        result: dict[str, Any] = {
            "reef_answered_200": self.tally.answered,
            "receipts": len(receipts),
            "answers_without_receipt": self.tally.without_receipt,
            "records_listed_by_api": len(listed),
            "api_pages": pages,
            "records_in_sqlite": len(in_sqlite),
            "missing_from_api": len(receipts - listed),
            "missing_from_sqlite": len(receipts - in_sqlite) if db_path else None,
            "store_commits": store.get("commits"),
            "store_writes": store.get("writes"),
        }
        if store.get("commits"):
            result["rows_per_commit"] = store["writes"] / store["commits"]
        if floor is not None:
            conn = await connect(floor.port)
            result["floor_store"] = (await self._get_json(conn, floor.port, "/floor/status"))["store"]
            conn.close()
        log(f"verify: {len(receipts)} receipts, {len(receipts - listed)} missing from the API")
        return result


# ---------------------------------------------------------------------------------------------------------
# Entry point


def _port_pid(text: str) -> tuple[int, int | None]:
    port, _, pid = text.partition(":")
    return int(port), int(pid) if pid else None


def _machine() -> dict[str, Any]:
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kb = int(Path("/proc/meminfo").read_text().split()[1])
    return {
        "host": platform.node(),
        "kernel": platform.release(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "mem_gib": round(mem_kb / 1024 / 1024, 1),
        "loadavg_at_start": Path("/proc/loadavg").read_text().split()[:3],
        "client_python": platform.python_version(),
        "client_httptools": httptools.__version__,
        "client_uvloop": uvloop.__version__,
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings.quick() if args.quick else Settings.full()
    if args.soak_s is not None:
        settings.soak_s = args.soak_s
    targets = [Target("direct", args.direct, None)]
    targets.append(Target("floor-b", *_port_pid(args.floor)))
    targets.append(Target("reef", *_port_pid(args.reef)))
    if args.litellm:
        targets.append(Target("litellm", *_port_pid(args.litellm)))
    if args.baseline:
        targets.append(Target("baseline", *_port_pid(args.baseline)))
    if args.otel:
        targets.append(Target("reef+otel", *_port_pid(args.otel)))
        targets.append(Target("reef+busy", *_port_pid(args.reef), busy_neighbour=True))
    if args.pass_through:
        # reef's token in its own header, the client's own key as its bearer (inference.client-auth pass)
        own = f"x-reef-token: {PASS_TOKEN}\r\nauthorization: Bearer {PASS_OWN_KEY}\r\n"
        targets.append(Target("reef+pass", *_port_pid(args.pass_through), headers=own))
    if args.token:
        targets.append(Target("reef+token", *_port_pid(args.token), headers=f"authorization: Bearer {PASS_TOKEN}\r\n"))
    pids = [t.pid for t in targets if t.pid is not None] + ([args.mock_pid] if args.mock_pid else [])
    neighbour = Neighbour()
    meter = CpuMeter([*pids, neighbour.pid])  # the neighbour's CPU is the bench's own, not foreign load
    bench = Bench(targets, settings, meter, neighbour)
    reef = targets[2]
    rss_start = {t.name: proc_rss_mb(t.pid) for t in targets if t.pid is not None}
    began = time.time()
    gc.collect()
    gc.freeze()  # the client's own long-lived objects stay out of collections during the run

    try:
        await bench.warm_up()
        lat = await bench.sequential(stream=False)
        stream = await bench.sequential(stream=True)
        exporting = next((t for t in targets if t.name == "reef+otel"), None)
        spans = {"after c=1": await bench.spans(exporting)} if exporting else {}
        tput = await bench.throughput()
        if exporting:
            spans["after c=32"] = await bench.spans(exporting)
        soak = await bench.soak(reef)
        verify = await bench.verify(reef, targets[1])
    finally:
        neighbour.close()
    return {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(began)),
        "duration_s": round(time.time() - began, 1),
        "mode": "quick" if args.quick else "full",
        "machine": _machine(),
        "meta": dict(item.split("=", 1) for item in args.meta),
        "settings": asdict(settings),
        "targets": {t.name: {"port": t.port, "pid": t.pid} for t in targets},
        "rss_start_mb": rss_start,
        "rss_end_mb": {t.name: proc_rss_mb(t.pid) for t in targets if t.pid is not None},
        "lat": lat,
        "stream": stream,
        "tput": tput,
        "soak": soak,
        "verify": verify,
        "errors": bench.errors,
        **({"spans": spans} if spans else {}),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--direct", type=int, help="the mock upstream's port")
    parser.add_argument("--floor", help="PORT:PID of floor_proxy.py --record")
    parser.add_argument("--reef", help="PORT:PID of reef serve")
    parser.add_argument("--litellm", help="PORT:PID of the LiteLLM proxy (optional)")
    parser.add_argument("--baseline", help="PORT:PID of reef serve at another commit (optional)")
    parser.add_argument("--otel", help="PORT:PID of reef serve exporting spans to a local OTLP sink (optional)")
    parser.add_argument(
        "--pass-through",
        help=f"PORT:PID of reef serve with inference.client-auth pass and REEF_TOKEN={PASS_TOKEN} (optional)",
    )
    parser.add_argument("--token", help=f"PORT:PID of reef serve with REEF_TOKEN={PASS_TOKEN}, the default client-auth")
    parser.add_argument("--mock-pid", type=int, help="the mock's PID, for CPU accounting")
    parser.add_argument("--quick", action="store_true", help="a ~1 minute smoke run")
    parser.add_argument("--soak-s", type=float, help="soak length in seconds (full: 300, quick: 15)")
    parser.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE", help="recorded as is")
    parser.add_argument("--out", type=Path, help="write the result JSON here")
    parser.add_argument("--render", type=Path, metavar="JSON", help="only print the table of a result file")
    args = parser.parse_args(argv)
    if args.render:
        print(render(json.loads(args.render.read_text())))
        return 0
    if args.direct is None or args.floor is None or args.reef is None:
        parser.error("--direct, --floor and --reef are required")
    result = uvloop.run(run(args))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
        log(f"result written to {args.out}")
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
