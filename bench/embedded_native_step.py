"""The embedded model's native decoding step by context length, and on a machine busy with something else.

The native decoding step (all layers and the head, on the kernels' threads: torch's count) of 1 and 4 rows, in
process:
1. by context: rows of `--contexts` positions (a coding agent's prompts run to thousands), where attention reads
   every row's keys and values each step beside the weights;
2. on a busy machine: short rows on a quiet machine, then beside `--busy` processes that each keep a core busy (as
   a build or a test run would), in alternating rounds. With as many busy processes as the decoding has threads,
   every thread of the step shares its core.

    .venv/bin/python bench/embedded_native_step.py [--contexts 64,512,2048] [--busy 1] [--rounds 6]

Prints markdown tables of median steps. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from reef_daemon.runtimes.embedded.batch import BatchCache
from reef_daemon.runtimes.embedded.decode_kernel import kernel_threads, load_kernel, torch_on_one_thread
from reef_daemon.runtimes.embedded.decode_step import NativeDecodeStep
from reef_daemon.runtimes.embedded.loading import load_model, resolve_source

ROWS = (1, 4)
STEPS = 40  # timed steps per round, after 5 untimed ones


def step_ms(model: Any, step: NativeDecodeStep, rows: int, context: int = 32) -> float:
    """The mean of STEPS decoding steps of `rows` rows from `context` positions each, in ms."""
    from transformers import DynamicCache

    batch = BatchCache()
    for _ in range(rows):
        cache = DynamicCache(config=model.config)
        model(input_ids=torch.tensor([[1, 2, 3, 4] * (context // 4)]), cache=cache, use_cache=True, logits_to_keep=1)
        batch.add(cache)
    with torch_on_one_thread():
        for _ in range(5):
            step.step([5] * rows, batch, [None] * rows)
            batch.advance()
        began = time.perf_counter()
        for _ in range(STEPS):
            step.step([5] * rows, batch, [None] * rows)
            batch.advance()
    return (time.perf_counter() - began) / STEPS * 1000


def busy(count: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", default="64,512,2048", help="positions per row, comma-separated")
    parser.add_argument("--busy", type=int, default=1, help="processes keeping a core busy beside the decoding")
    parser.add_argument("--rounds", type=int, default=6, help="alternating quiet and busy rounds")
    args = parser.parse_args()
    kernel = load_kernel()
    if kernel is None:
        raise SystemExit("no decoding kernels could be built here: nothing to measure")
    with tempfile.TemporaryDirectory(prefix="reef-bench-step-") as state:
        model = load_model(resolve_source(None), Path(state)).model
    step = NativeDecodeStep(model, kernel)
    print(f"kernel {kernel.kind}, {kernel_threads()} decoding threads\n")
    with torch.inference_mode():
        print("\n".join(context_table(model, step, [int(c) for c in args.contexts.split(",")], args.rounds)))
        print()
        print("\n".join(busy_table(model, step, args.busy, args.rounds)))


def context_table(model: Any, step: NativeDecodeStep, contexts: list[int], rounds: int) -> list[str]:
    lines = ["| positions per row | " + " | ".join(f"{rows} row(s): step ms, tokens/s" for rows in ROWS) + " |",
             "|---|" + "---|" * len(ROWS)]  # fmt: skip
    for context in contexts:
        cells = []
        for rows in ROWS:
            ms = statistics.median(step_ms(model, step, rows, context) for _ in range(max(1, rounds // 2)))
            cells.append(f"{ms:.2f}, {rows / ms * 1000:.0f}")
        lines.append(f"| {context} | " + " | ".join(cells) + " |")
    return lines


def busy_table(model: Any, step: NativeDecodeStep, count: int, rounds: int) -> list[str]:
    quiet: dict[int, list[float]] = {rows: [] for rows in ROWS}
    loaded: dict[int, list[float]] = {rows: [] for rows in ROWS}
    for _ in range(rounds):
        for rows in ROWS:
            quiet[rows].append(step_ms(model, step, rows))
        others = busy(count)
        try:
            for rows in ROWS:
                loaded[rows].append(step_ms(model, step, rows))
        finally:
            for process in others:
                process.kill()
                process.wait()
    lines = [f"| rows | quiet step ms | beside {count} busy process(es) ms | ratio |", "|---|---|---|---|"]
    for rows in ROWS:
        calm, busy_ms = statistics.median(quiet[rows]), statistics.median(loaded[rows])
        lines.append(f"| {rows} | {calm:.2f} | {busy_ms:.2f} | {busy_ms / calm:.2f}x |")
    return lines


if __name__ == "__main__":
    main()
