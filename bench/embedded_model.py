"""Benchmark of the embedded model (SmolLM2-135M-Instruct on the CPU): load, time to first token, tokens/s, RSS.

Each phase runs in its own process, as a user would meet it:

1. cold load: a fresh state directory, so the GGUF is dequantised and cached (`load_model`, imports excluded);
2. cached load: a new process loading that cache; the library imports (torch, and the transformers modules a
   model load pulls in) are measured apart, since every Python process that uses torch pays them;
3. serving: `reef serve` on that state directory; over HTTP, greedy chat streams of `--max-tokens` tokens,
   one alone and then `--concurrent` identical ones at once, each round with a prompt new to the daemon (the
   concurrent requests read it once: the others start from its kept cache). Time to first token is from sending
   the request to the first text delta; tokens/s per stream is (tokens - 1) / (last delta - first delta);
   aggregate is all tokens over the wall time of the batch. The served ratio is that aggregate over one stream's
   tokens over its wall time, prompt reading included on both sides. Peak RSS is the daemon's VmHWM at the end.

    .venv/bin/python bench/embedded_model.py [--rounds 5] [--max-tokens 96] [--concurrent 4]

Prints a markdown table and writes bench/results/<time>-embedded.json. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
PROMPT = "Write a long story about a dog who learns to sail."
TARGETS = {"cached_load_s": 2.0, "one_stream_tok_s": 20.0, "peak_rss_gib": 2.0}

LOAD_SNIPPET = """
import json, resource, sys, time
from pathlib import Path
began = time.perf_counter()
import torch  # noqa: F401
# transformers imports lazily: touching these classes loads the modules a model load would (torch.distributed...)
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM  # noqa: F401
from reef_daemon.runtimes.embedded.loading import load_model, resolve_source
imported = time.perf_counter()
loaded = load_model(resolve_source(None), Path(sys.argv[1]))
done = time.perf_counter()
print(json.dumps({"import_s": imported - began, "load_s": done - imported, "cold": loaded.cold,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def load_phase(state: Path) -> dict[str, Any]:
    out = subprocess.run([PYTHON, "-c", LOAD_SNIPPET, str(state)], capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def new_prompt(number: int) -> str:
    """PROMPT made new to the daemon, so its request reads it rather than start from the cache of the last prompt."""
    return f"{PROMPT} (Story {number}.)"


async def one_stream(client: httpx.AsyncClient, url: str, max_tokens: int, prompt: str = PROMPT) -> dict[str, float]:
    body = {
        "model": "smollm2",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    sent = time.perf_counter()
    first = last = None
    tokens = 0
    async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            choices = chunk.get("choices") or []
            if choices and choices[0].get("delta", {}).get("content"):
                last = time.perf_counter()
                first = first or last
    assert first is not None and last is not None
    return {
        "ttft_s": first - sent,
        "tokens": tokens,
        "tok_s": (tokens - 1) / (last - first) if last > first else 0.0,
        "wall_s": time.perf_counter() - sent,
    }


async def serve_phase(url: str, rounds: int, max_tokens: int, concurrent: int) -> dict[str, Any]:
    headers = {"x-reef-scenario": "bench-embedded"}
    async with httpx.AsyncClient(headers=headers, timeout=600) as client:
        await one_stream(client, url, 8)  # warm-up
        # Every round's prompt is new: one stream reads its prompt, and `concurrent` identical requests read theirs
        # once (the others start from its cache).
        single = [await one_stream(client, url, max_tokens, new_prompt(n)) for n in range(rounds)]
        batches = []
        for n in range(rounds, 2 * rounds):
            began = time.perf_counter()
            together = (one_stream(client, url, max_tokens, new_prompt(n)) for _ in range(concurrent))
            streams = await asyncio.gather(*together)
            wall = time.perf_counter() - began
            batches.append({"streams": streams, "aggregate_tok_s": sum(s["tokens"] for s in streams) / wall})
    return {"single": single, "concurrent": batches}


def start_daemon(state: Path, port: int, *settings: str) -> subprocess.Popen[bytes]:
    command = [
        str(ROOT / ".venv" / "bin" / "reef"), "serve", "--reef.state-dir", str(state), "--reef.port", str(port),
        *settings,
    ]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def wait_ready(url: str, daemon: subprocess.Popen[bytes]) -> float:
    began = time.perf_counter()
    while daemon.poll() is None:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return time.perf_counter() - began
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"reef serve exited with {daemon.returncode} before it was ready")


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run(args: argparse.Namespace) -> dict[str, Any]:
    state = Path(tempfile.mkdtemp(prefix="reef-bench-embedded-"))
    try:
        cold = load_phase(state)
        cached = [load_phase(state) for _ in range(args.rounds)]
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        daemon = start_daemon(state, port)
        try:
            ready_s = wait_ready(url, daemon)
            serving = asyncio.run(serve_phase(url, args.rounds, args.max_tokens, args.concurrent))
            rss = peak_rss_mib(daemon.pid)
            status = httpx.get(f"{url}/reef/status").json()["runtime"]
        finally:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
    finally:
        shutil.rmtree(state, ignore_errors=True)
    return {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"cpus": os.cpu_count(), "loadavg_at_end": os.getloadavg()},
        "settings": vars(args),
        "cold": cold,
        "cached": cached,
        "serve_ready_s": ready_s,
        "serving": serving,
        "daemon_peak_rss_mib": rss,
        "status": status,
    }


def render(result: dict[str, Any]) -> str:
    med = statistics.median
    single = result["serving"]["single"]
    batches = result["serving"]["concurrent"]
    per_stream = [s["tok_s"] for b in batches for s in b["streams"]]
    rows = [
        ("cold load (dequantise + cache + load)", f"{result['cold']['load_s']:.1f} s", ""),
        ("cached load (median, imports excluded)", f"{med(c['load_s'] for c in result['cached']):.2f} s",
         f"≤ {TARGETS['cached_load_s']:g} s"),
        ("library imports (torch, transformers; median)", f"{med(c['import_s'] for c in result['cached']):.2f} s", ""),
        ("`reef serve` start to ready (cached)", f"{result['serve_ready_s']:.1f} s", ""),
        ("time to first token, one stream (median)", f"{med(s['ttft_s'] for s in single) * 1000:.0f} ms", ""),
        ("tokens/s, one stream (median)", f"{med(s['tok_s'] for s in single):.1f}",
         f"≥ {TARGETS['one_stream_tok_s']:g}"),
        (f"time to first token, {result['settings']['concurrent']} streams (median)",
         f"{med(s['ttft_s'] for b in batches for s in b['streams']) * 1000:.0f} ms", ""),
        (f"tokens/s per stream, {result['settings']['concurrent']} streams (median)", f"{med(per_stream):.1f}", ""),
        (f"tokens/s aggregate, {result['settings']['concurrent']} streams (median)",
         f"{med(b['aggregate_tok_s'] for b in batches):.1f}", ""),
        (f"served ratio: aggregate tokens/s, {result['settings']['concurrent']} streams vs 1 (as a client sees it)",
         f"{med(b['aggregate_tok_s'] for b in batches) / med(s['tokens'] / s['wall_s'] for s in single):.2f}x",
         "≥ 2.5x"),
        ("peak RSS of the daemon", f"{result['daemon_peak_rss_mib'] / 1024:.2f} GiB",
         f"≤ {TARGETS['peak_rss_gib']:g} GiB"),
        ("peak RSS of the cold load", f"{result['cold']['peak_rss_mib'] / 1024:.2f} GiB", ""),
    ]  # fmt: skip
    lines = ["| measure | value | target |", "|---|---|---|"]
    lines += [f"| {name} | {value} | {target} |" for name, value, target in rows]
    load = ", ".join(f"{x:.1f}" for x in result["machine"]["loadavg_at_end"])
    lines.append(f"\n{result['machine']['cpus']} CPUs, load average at the end {load}; {result['when']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--concurrent", type=int, default=4)
    parser.add_argument("--render", type=Path, help="print the table of an earlier result file and exit")
    args = parser.parse_args()
    if args.render:
        print(render(json.loads(args.render.read_text())))
        return
    result = run(args)
    results = ROOT / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{time.strftime('%Y%m%d-%H%M%S')}-embedded.json"
    path.write_text(json.dumps(result, indent=2))
    print(render(result))
    print(f"\nresult: {path}")


if __name__ == "__main__":
    main()
