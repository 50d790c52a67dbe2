"""Where the proxy's CPU goes: py-spy samples a running `reef serve` while a closed-loop client loads it.

Starts the mock upstream and reef (pinned like run.sh: mock and client on CPU0, reef on CPU1), loads reef with
non-streaming requests and then with streams (20 chunks each), samples reef with `py-spy record --format raw`
for each load, and prints the functions that take the most samples: by self time (the function itself is on
top of the stack) and by inclusive time (anywhere on it). Nothing is asserted; it is for reading.

    bench/.venv-bench/bin/python bench/proxy_profile.py [--seconds 20] [--concurrency 8] [--top 25]
        [--reef PATH_TO_REEF] [--out DIR] [--native] [--otel]

--otel has reef export OpenTelemetry spans to a local OTLP/HTTP sink (bench/otlp_sink.py), the sink and reef's
export process on CPU0, as run.sh --otel does: the profile then shows what exporting costs the daemon.

Needs py-spy in the bench venv (`bench/.venv-bench/bin/pip install py-spy`) and permission to ptrace reef
(root, or kernel.yama.ptrace_scope=0).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import uvloop
from proxy_overhead import build_request, connect

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pinned(cpu: int, argv: list[str]) -> list[str]:
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        return ["taskset", "-c", str(cpu), *argv]
    return argv


def wait_ready(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    body = b'{"model":"mock","messages":[{"role":"user","content":"hi"}]}'
    for _ in range(240):
        if process.poll() is not None:
            sys.exit(f"a process exited before it answered; its log:\n{log.read_text()}")
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            data=body,
            headers={"content-type": "application/json", "x-reef-scenario": "bench"},
        )
        try:
            with urllib.request.urlopen(request, timeout=5):
                return
        except OSError:
            time.sleep(0.5)
    sys.exit(f"no answer within 2 minutes; its log:\n{log.read_text()}")


async def load(port: int, *, stream: bool, concurrency: int, seconds: float) -> int:
    """A closed loop of `concurrency` connections for `seconds`; returns how many answers came back."""
    request = build_request(port, stream=stream)
    deadline = time.perf_counter() + seconds
    done = [0]

    async def worker() -> None:
        conn = await connect(port)
        while time.perf_counter() < deadline:
            outcome = await conn.exchange(request, keep_body=False)
            done[0] += outcome.ok
        conn.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done[0]


def top(raw: Path, count: int) -> str:
    """The functions with the most samples in a py-spy raw (collapsed stacks) file, self and inclusive."""
    own: collections.Counter[str] = collections.Counter()
    anywhere: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, samples = line.rpartition(" ")
        if not stack:
            continue
        n = int(samples)
        frames = [_frame(f) for f in stack.split(";")]
        frames = [f for f in frames if f]
        if not frames:
            continue
        total += n
        own[frames[-1]] += n
        for frame in set(frames):
            anywhere[frame] += n
    lines = [f"{total} samples", "", "| self % | function |", "|---|---|"]
    lines += [f"| {n / total * 100:.1f} | `{name}` |" for name, n in own.most_common(count)]
    lines += ["", "| inclusive % | function |", "|---|---|"]
    lines += [f"| {n / total * 100:.1f} | `{name}` |" for name, n in anywhere.most_common(count)]
    return "\n".join(lines)


def _frame(frame: str) -> str:
    """`function (path/to/file.py:12)` → `function (file.py)`: lines merged, so a function is one entry."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    parts = Path(path).parts
    short = "/".join(parts[-2:]) if parts else path
    return f"{name} ({short})" if name else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--reef", default=str(ROOT / ".venv" / "bin" / "reef"))
    parser.add_argument("--out", type=Path, help="keep the raw profiles here")
    parser.add_argument("--native", action="store_true", help="sample C frames too (py-spy --native)")
    parser.add_argument("--otel", action="store_true", help="export spans to a local OTLP/HTTP sink")
    args = parser.parse_args()
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    work = Path(tempfile.mkdtemp(prefix="reef-profile."))
    out = args.out or work
    out.mkdir(parents=True, exist_ok=True)
    mock_port, reef_port, sink_port = free_port(), free_port(), free_port()
    processes: list[subprocess.Popen[bytes]] = []
    try:
        mock_log, reef_log = work / "mock.log", work / "reef.log"
        mock = subprocess.Popen(
            pinned(0, [sys.executable, str(HERE / "mock_upstream.py"), "--port", str(mock_port)]),
            stdout=mock_log.open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        processes.append(mock)
        export: list[str] = []
        if args.otel:
            sink = [str(Path(args.reef).parent / "python"), str(HERE / "otlp_sink.py"), "--port", str(sink_port)]
            processes.append(subprocess.Popen(pinned(0, sink), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
            export = ["--telemetry.otlp-endpoint", f"http://127.0.0.1:{sink_port}"]
        reef = subprocess.Popen(
            pinned(1, [args.reef, "serve", "--inference.upstream-url", f"http://127.0.0.1:{mock_port}",
                       "--reef.port", str(reef_port), "--reef.state-dir", str(work / "reef"), *export]),
            stdout=reef_log.open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        processes.append(reef)
        wait_ready(mock_port, mock, mock_log)
        wait_ready(reef_port, reef, reef_log)
        if args.otel and shutil.which("taskset"):  # reef's export process goes where the sink is, as in run.sh
            exporters = subprocess.run(["pgrep", "-P", str(reef.pid), "-f", "reef_daemon.telemetry.exporter"],
                                       capture_output=True, text=True).stdout.split()  # fmt: skip
            for exporter in exporters:
                subprocess.run(["taskset", "-a", "-pc", "0", exporter], check=True, stdout=subprocess.DEVNULL)
        uvloop.run(load(reef_port, stream=False, concurrency=args.concurrency, seconds=3))  # warm-up
        for name, stream in (("non-stream", False), ("stream", True)):
            raw = out / f"{name}.txt"
            sampling = ["--native"] if args.native else ["--nonblocking"]  # native frames need the process paused
            spy = subprocess.Popen(
                [py_spy, "record", "--pid", str(reef.pid), "--format", "raw", "--rate", "250", *sampling,
                 "--duration", str(int(args.seconds)), "--output", str(raw)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            time.sleep(0.5)
            answers = uvloop.run(load(reef_port, stream=stream, concurrency=args.concurrency, seconds=args.seconds))
            spy.wait(timeout=args.seconds + 30)
            print(f"## {name}: {answers} answers in {args.seconds:.0f} s at c={args.concurrency}\n")
            print(top(raw, args.top) + "\n")
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        if args.out is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
