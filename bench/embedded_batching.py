"""Concurrent streams on the embedded model: batched decoding against taking turns one token each.

For 1, 2, 4 and 8 concurrent greedy streams of `--max-tokens` tokens (chat completions through the embedded runtime in
this process), the aggregate tokens/s is all output tokens over the wall time from the first request to the last
end. Then, while 4 streams decode, a new request's time to first token: a short question, and a prompt of about
1,000 tokens (read in chunks between decoding steps). Peak RSS is the process's high-water mark.

"kernels" is decoding as served (the native step and the decoding kernels, `decode_step.py`); "torch" is what
decoding falls back to where no C compiler builds the kernels (transformers' forward pass with torch's fp16
product; the process is given a compiler that does not exist). Each engine runs in its own process, one after the
other, so the ratios come from one run on the same machine. (Turn-taking, before batched decoding, is in
bench/HISTORY.md; its worker no longer fits the engine around it.)

    .venv/bin/python bench/embedded_batching.py [--state-dir DIR] [--max-tokens 96] [--threads N]

`--threads 1` keeps other processes' load from stalling torch's threads at every operation (on a loaded 2-core
machine, two threads made a step several times slower than one), so the ratios stay comparable.

Prints a markdown table and writes bench/results/<time>-batching.json. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ENGINES = ("torch", "kernels")
STORY = "Write a long story about a dog who learns to sail."
SHORT = "What is the capital of France?"
LONG = "Summarise this in one sentence: " + "The harbour was quiet in the morning and the boats rocked gently. " * 70
STREAMS = (1, 2, 4, 8)


async def generate(runtime: Any, prompt: str, max_tokens: int, started: asyncio.Event | None = None) -> dict[str, Any]:
    """One streamed greedy answer: its output tokens, and when it was sent, first gave text and ended; `started` is
    set at its first text."""
    payload = {
        "model": "reef",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
    }
    sent = time.perf_counter()
    answer = await runtime.send("/v1/chat/completions", b"", payload, {})
    first = None
    async for _ in answer.chunks():
        first = first or time.perf_counter()
        if started is not None:
            started.set()
    return {"tokens": len(answer.token_data()["output_ids"]), "sent": sent, "first": first, "end": time.perf_counter()}


async def measure(engine: str, state_dir: Path | None, max_tokens: int, threads: int | None) -> dict[str, Any]:
    import torch

    from reef_daemon.runtimes.embedded import runtime as runtime_module
    from reef_daemon.settings import load_settings

    if threads:
        torch.set_num_threads(threads)
    overrides = {"reef.state-dir": str(state_dir)} if state_dir else {}
    runtime = runtime_module.EmbeddedRuntime(load_settings(overrides=overrides, environ={}))
    await runtime.start()
    result: dict[str, Any] = {"engine": engine, "streams": {}}
    try:
        await generate(runtime, SHORT, 8)  # warm up
        for count in STREAMS:
            # A prompt new to the runtime for each count: the streams read it once (the others start from its cache).
            prompt = f"{STORY} (Story {count}.)"
            runs = await asyncio.gather(*(generate(runtime, prompt, max_tokens) for _ in range(count)))
            wall = max(r["end"] for r in runs) - min(r["sent"] for r in runs)
            result["streams"][count] = sum(r["tokens"] for r in runs) / wall
            print(f"{engine}: {count} streams, {result['streams'][count]:.1f} tok/s", file=sys.stderr, flush=True)
        for name, prompt in (("ttft_short_s", SHORT), ("ttft_long_s", LONG)):
            started = [asyncio.Event() for _ in range(4)]
            busy = [asyncio.create_task(generate(runtime, STORY, max_tokens, event)) for event in started]
            for event in started:
                await event.wait()  # all four are decoding
            newcomer = await generate(runtime, prompt, 4)
            result[name] = newcomer["first"] - newcomer["sent"]
            await asyncio.gather(*busy)
    finally:
        await runtime.close()
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def render(results: list[dict[str, Any]]) -> str:
    lines = [
        "| engine | " + " | ".join(f"{n} stream{'s' if n > 1 else ''} tok/s" for n in STREAMS)
        + " | 4 vs 1 | TTFT short, 4 decoding | TTFT 1k-token prompt, 4 decoding | peak RSS MiB |",
        "|---" * (len(STREAMS) + 5) + "|",
    ]  # fmt: skip
    for r in results:
        speeds = [r["streams"][str(n)] for n in STREAMS]
        lines.append(
            f"| {r['engine']} | " + " | ".join(f"{s:.1f}" for s in speeds)
            + f" | {speeds[2] / speeds[0]:.2f}x | {r['ttft_short_s']:.2f} s | {r['ttft_long_s']:.2f} s"
            f" | {r['peak_rss_mib']:.0f} |"
        )  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", type=Path, help="a state directory holding the model cache (default: reef's)")
    parser.add_argument("--max-tokens", type=int, default=96, help="tokens per stream")
    parser.add_argument("--threads", type=int, help="torch threads of each engine's process (default: torch's)")
    parser.add_argument("--engine", choices=ENGINES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine:
        result = measure(args.engine, args.state_dir, args.max_tokens, args.threads)
        print(json.dumps(asyncio.run(result)))
        return
    results = []
    for engine in ENGINES:
        command = [sys.executable, __file__, "--engine", engine, "--max-tokens", str(args.max_tokens)]
        command += ["--state-dir", str(args.state_dir)] if args.state_dir else []
        command += ["--threads", str(args.threads)] if args.threads else []
        environ = {**os.environ, "CC": "/nonexistent/cc"} if engine == "torch" else None  # no kernels build
        out = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, text=True, check=True, env=environ)
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    table = render(results)
    print(table)
    out_file = ROOT / "bench" / "results" / f"{time.strftime('%Y%m%d-%H%M%S')}-batching.json"
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text(
        json.dumps({"max_tokens": args.max_tokens, "threads": args.threads, "results": results}, indent=1)
    )
    print(f"\nwritten: {out_file.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
