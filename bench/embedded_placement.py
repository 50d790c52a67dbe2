"""How the host's placement of the two virtual cores moves the read bandwidth, and whether the decoding product follows.

The host switches within seconds between two placements: the cores sharing one memory path (all threads read little
more than one) or each with its own (all threads read about twice what one does). `embedded_decode_profile.py` holds
a stream to the bandwidth read around it; this bench asks whether the product a decoding step is made of can use a
doubled bandwidth at all. In a loop, each sample reads, in turn:
1. the bandwidth of one thread and of all threads (a torch sum over 512 MiB on huge pages, as the profile reads it);
2. one 4-bit product of one row (`reef_linear`, a 1,536 x 576 weight on a Q4_1 grid, as a layer's gate: 550 KB with
   its scales) on all threads, cycling through 150 distinct copies (82 MB, so each comes from memory, as in a step),
   and through 30 (16 MB, so each comes from the last-level cache), and through the 150 on one thread;
3. all threads' bandwidth again; a sample whose two all-thread reads agree on the placement is kept under it.

    .venv/bin/python bench/embedded_placement.py [--seconds 300]

Prints, for each placement seen, the medians of its samples. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

# torch's OpenMP workers sleep after a bandwidth read rather than spin ~10 ms on the core the product's helper needs
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from embedded_decode_profile import MEASURED, SEPARATE_PATHS, bandwidth_gb_s

from reef_daemon.runtimes.embedded.decode_kernel import FORMATS, DecodeKernel, kernel_threads, load_kernel
from reef_daemon.runtimes.embedded.huge_pages import HugePageArena

OUTPUTS, INPUTS = 1536, 576
FROM_MEMORY, FROM_CACHE = 150, 30


def q4_weight() -> torch.Tensor:
    """A weight whose every block of 32 is on a 16-step grid with fp16 step and minimum, as a GGUF's Q4_1 blocks."""
    generator = torch.Generator().manual_seed(0)
    steps = torch.randint(0, 16, (OUTPUTS, INPUTS), generator=generator)
    steps[:, 0::32], steps[:, 1::32] = 0, 15  # each block spans the grid, so the packer finds it
    return steps.float() * 2**-7 - 2**-4


def copies(kernel: DecodeKernel, arena: HugePageArena, count: int) -> list[torch.Tensor]:
    exact = kernel.pack_int8(q4_weight(), exact_only=True, arena=arena)
    assert exact is not None, "the weight is on a 4-bit grid"
    one = kernel.pack_int4(exact.panels, arena)
    assert one is not None, "the weight is on a 4-bit grid"
    return [arena.empty(tuple(one.shape), one.dtype).copy_(one) for _ in range(count)]


def product_us(
    kernel: DecodeKernel, row: torch.Tensor, weights: list[torch.Tensor], passes: int = 3, threads: int = 0
) -> float:
    """The median time of one product on `threads` threads (0: all the kernels take), over `passes` cycles through
    `weights`: the library's own call, into one output kept throughout (`DecodeKernel.linear` makes its output
    anew, which would be timed too)."""
    out = torch.empty(1, OUTPUTS)
    threads, nibbles = threads or kernel_threads(), FORMATS.index("int4")
    seconds = []
    for _ in range(passes):
        began = time.perf_counter()
        for weight in weights:
            kernel.library.reef_linear(row.data_ptr(), 1, INPUTS, weight.data_ptr(), nibbles, OUTPUTS,
                                       out.data_ptr(), threads)  # fmt: skip
        seconds.append((time.perf_counter() - began) / len(weights))
    return statistics.median(seconds) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300, help="how long to sample")
    args = parser.parse_args()
    kernel = load_kernel()
    if kernel is None:
        sys.exit("the decoding kernels cannot be built here")
    arena = HugePageArena()
    with torch.inference_mode():
        memory = arena.empty((MEASURED,), torch.float32).fill_(1.0)
        from_memory, from_cache = copies(kernel, arena, FROM_MEMORY), copies(kernel, arena, FROM_CACHE)
        row = torch.randn(1, INPUTS, generator=torch.Generator().manual_seed(1))
        samples: dict[str, list[tuple[float, float, float, float, float]]] = {"shared": [], "separate": []}
        changed, end = 0, time.monotonic() + args.seconds
        while time.monotonic() < end:
            one = bandwidth_gb_s(memory, repeats=3, threads=1)
            before = bandwidth_gb_s(memory, repeats=3)
            product_us(kernel, row, from_cache, passes=2)  # the helper wakes
            cold, warm = product_us(kernel, row, from_memory), product_us(kernel, row, from_cache, passes=5)
            alone = product_us(kernel, row, from_memory, threads=1)
            after = bandwidth_gb_s(memory, repeats=3)
            apart = [read >= SEPARATE_PATHS * one for read in (before, after)]
            if all(apart) or not any(apart):
                samples["separate" if all(apart) else "shared"].append((one, (before + after) / 2, cold, warm, alone))
            else:
                changed += 1
    print(
        "| the cores' memory paths | samples | one thread reads, GB/s | all threads read, GB/s |"
        f" product from memory ({FROM_MEMORY} copies), µs | from the last-level cache ({FROM_CACHE}), µs |"
        " from memory on one thread, µs |"
    )
    print("|---|---|---|---|---|---|---|")
    for paths, kept in samples.items():
        if kept:
            one, every, cold, warm, alone = (statistics.median(column) for column in zip(*kept, strict=True))
            print(f"| {paths} | {len(kept)} | {one:.1f} | {every:.1f} | {cold:.2f} | {warm:.2f} | {alone:.2f} |")
    print(f"\n{changed} samples where the placement changed between the reads; one product reads"
          f" {from_memory[0].numel() * from_memory[0].element_size() / 1e3:.0f} KB.")  # fmt: skip


if __name__ == "__main__":
    main()
