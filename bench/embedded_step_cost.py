"""Where one batched decoding step of the embedded model spends its time, for 1, 2, 4 and 8 rows.

For each row count, a `BatchCache` of that many short contexts is stepped through transformers' forward pass (the
decoding layers, without the native step or the HTTP layers), once with the decoding kernels and once with torch's
fp16 product (what decoding falls back to without a C compiler). Then the linear layers' products alone are timed on
every decode weight: the kernel on the default copies (4-bit where the GGUF's weights are, 8-bit elsewhere), on
8-bit copies of every weight and on fp16 ones (on 2 MiB pages, as decoding has them), torch's fp16 product (all rows
in one call), fp32 products on a converted copy (MKL) in fixed groups of 4 rows (a fixed shape, so a row's result
does not depend on the batch), and the time to read every fp16 weight once (an integer maximum over their bits).
Run with one torch thread by default, so a loaded machine's scheduling noise stays out of the ratios.

    .venv/bin/python bench/embedded_step_cost.py [--threads 1] [--steps 12]

Prints markdown tables. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from reef_daemon.runtimes.embedded.batch import BatchCache
from reef_daemon.runtimes.embedded.decode_kernel import DecodeKernel, decoding_method, load_kernel
from reef_daemon.runtimes.embedded.huge_pages import HugePageArena
from reef_daemon.runtimes.embedded.loading import load_model, resolve_source
from reef_daemon.runtimes.embedded.precision import DecodeLinear, decode_copies

ROWS = (1, 2, 4, 8)
GROUP = 4  # rows per fp32 product in the fixed-shape alternative
CHUNK = 1536  # weight rows converted at a time in the fp32 alternative (the output head is 49,152 rows)


def best_of(run: Callable[[], object], repeats: int) -> float:
    """The fastest of `repeats` runs, in ms (the least disturbed by other processes)."""
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - began)
    return best * 1000


def step_table(model: Any, steps: int) -> list[str]:
    from transformers import DynamicCache

    layers = [m for m in model.modules() if isinstance(m, DecodeLinear)]
    kernel = load_kernel()
    lines = [
        "| rows | kernel step ms | tok/s | vs 1 row | torch fp16 step ms | tok/s | vs 1 row |",
        "|---|---|---|---|---|---|---|",
    ]
    rates: dict[str, float] = {}
    for rows in ROWS:
        batch = BatchCache()
        for row in range(rows):
            cache = DynamicCache(config=model.config)
            model(input_ids=torch.tensor([[1, 2, 3, 4] * (8 + row)]), cache=cache, use_cache=True, logits_to_keep=1)
            batch.add(cache)

        def step(batch: BatchCache = batch, rows: int = rows) -> None:
            positions, mask = batch.step_inputs()
            inputs = torch.full((rows, 1), 5)
            model(input_ids=inputs, position_ids=positions, attention_mask=mask, cache=batch, logits_to_keep=1)
            batch.advance()

        cells = []
        for name, use in (("kernel", kernel), ("torch", None)):
            _decode_with(layers, use)
            ms = best_of(step, steps)
            rates.setdefault(name, rows / ms)
            cells.append(f"{ms:.1f} | {rows / ms * 1000:.1f} | {rows / ms / rates[name]:.2f}x")
        _decode_with(layers, kernel)
        lines.append(f"| {rows} | " + " | ".join(cells) + " |")
    return lines


def _decode_with(layers: list[DecodeLinear], kernel: DecodeKernel | None) -> None:
    """Make every decoding layer multiply with `kernel`, or with torch's fp16 product where None."""
    for layer in layers:
        layer._kernel = kernel
        layer.refresh()


def kernel_table(model: Any, repeats: int) -> list[str]:
    kernel = load_kernel()
    assert kernel is not None, decoding_method("fp16 weights")
    arena = HugePageArena()  # where decoding's copies live
    layers = [m for m in model.modules() if isinstance(m, DecodeLinear)]
    weights = [m.weight.detach().to(torch.float16) for m in layers]
    default = [m.decode_weight for m in layers]  # as decoding reads them
    packed = [kernel.pack(w, arena) for w in weights]
    eight_bit = [kernel.pack_int8(m.weight.detach(), arena=arena) for m in layers]
    scratch = torch.empty(CHUNK * max(w.shape[1] for w in weights))
    group = torch.zeros(GROUP, max(w.shape[1] for w in weights))

    def reef_kernel(rows: int) -> None:
        for w, p in zip(weights, packed, strict=True):
            kernel.linear(torch.ones(rows, w.shape[1]), p, w.shape[0])

    def reef_kernel_default(rows: int) -> None:
        for w, p in zip(weights, default, strict=True):
            kernel.linear(torch.ones(rows, w.shape[1]), p, w.shape[0])

    def reef_kernel_8_bit(rows: int) -> None:
        for w, p in zip(weights, eight_bit, strict=True):
            kernel.linear(torch.ones(rows, w.shape[1]), p.panels, w.shape[0])

    def fp16(rows: int) -> None:
        for w in weights:
            F.linear(torch.ones(rows, w.shape[1], dtype=torch.float16), w)

    def fp32_groups(rows: int) -> None:
        for w in weights:
            for start in range(0, w.shape[0], CHUNK):
                part = w[start : start + CHUNK]
                tile = scratch[: part.numel()].view(part.shape)
                tile.copy_(part)
                for _ in range(0, rows, GROUP):
                    F.linear(group[:, : w.shape[1]], tile)

    read = best_of(lambda: [w.view(torch.int16).amax() for w in weights], repeats)
    lines = [
        f"Reading every fp16 decode weight once ({sum(w.numel() for w in weights) * 2 / 2**20:.0f} MiB): {read:.1f} ms",
        "",
        f"| rows | reef kernel ({kernel.kind}), default copies ({decode_copies(model)}) ms | 8-bit copies ms"
        " | fp16 copies ms | torch fp16, one call ms | fp32 on converted tiles, groups of 4 ms |",
        "|---|---|---|---|---|---|",
    ]
    for rows in ROWS:
        ours = best_of(partial(reef_kernel_default, rows), repeats)
        eight = best_of(partial(reef_kernel_8_bit, rows), repeats)
        half = best_of(partial(reef_kernel, rows), repeats)
        served = best_of(partial(fp16, rows), repeats)
        grouped = best_of(partial(fp32_groups, rows), repeats)
        lines.append(f"| {rows} | {ours:.1f} | {eight:.1f} | {half:.1f} | {served:.1f} | {grouped:.1f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--steps", type=int, default=12, help="timed repeats per row count (the fastest is kept)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model(resolve_source(None), Path(tempfile.mkdtemp())).model
    with torch.inference_mode():
        print("\n".join(step_table(model, args.steps)))
        print()
        print("\n".join(kernel_table(model, max(3, args.steps // 3))))


if __name__ == "__main__":
    main()
