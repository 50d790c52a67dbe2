"""Where one stream's decoding time goes in `reef serve` on the embedded model, and the memory bound it is held to.

In one run, on the same machine, `--rounds` times in turn (the host's bandwidth moves within seconds, so each stream
is held to the bandwidth read around it):
1. the read bandwidth: the median of several passes summing a 512 MiB fp32 tensor (torch, all threads), on ordinary
   memory and on the memory meant for 2 MiB pages that the decode copies live on (`huge_pages.py`), the higher one
   (on huge pages, where the kernel grants them), read just before the stream and again just after it; and one
   thread's, on huge pages;
2. the bound: the higher of the two reads over the bytes a decoding step reads (every decode weight once), as
   tokens/s, for the copies `reef serve` decodes from by default and for fp16 copies (`embedded.decode-weights fp16`);
3. `reef serve` on a temporary state directory (the model cache of `~/.cache/reef/models`), streaming a greedy
   answer of `--tokens` tokens: tokens/s from the first text delta to the last, and as a client sees it (all tokens
   over the time from sending to the last byte), and each against that round's bound. Each round says whether the
   cores read memory through one path (all threads read little more than one: "shared") or each through its own
   (at least 1.5x: "separate", where the host placed the two virtual cores apart), or changed during the round;
   the summary gives all rounds, and each kind apart when a run has both;
4. py-spy over the daemon while it streams one more (`--concurrent N`: N at once; `--format raw`, `--nonblocking`:
   a sampler that pauses the daemon 200 times a second put a third of a one-row step's samples in the Python around
   the native call, where unpaused samples put 1-2 %), the generation
   thread's samples put in the parts of a decoding step (the native step's one call, products outside it, the
   rotary embedding, picking the token, the Python between them; without the decoding kernels,
   transformers' attention, norms and key/value writes) and what the thread does besides (reading the prompt,
   handing each token over).

    .venv/bin/python bench/embedded_decode_profile.py [--tokens 160] [--rounds 5] [--no-profile] [--concurrent 4]

Needs py-spy (bench/.venv-bench/bin/py-spy; `bench/.venv-bench/bin/pip install py-spy`) and permission to ptrace
(root, or kernel.yama.ptrace_scope=0). Prints markdown tables. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import inspect
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import torch

from reef_daemon.runtimes.embedded.batch import BatchCache, row_attention
from reef_daemon.runtimes.embedded.huge_pages import HugePageArena
from reef_daemon.runtimes.embedded.loading import load_model, resolve_source
from reef_daemon.runtimes.embedded.precision import DecodeLinear
from reef_daemon.runtimes.embedded.sampling import pick_token, pick_tokens

HERE = Path(__file__).resolve().parent
PROMPT = "Write a long story about a dog who learns to sail."


def step_parts() -> dict[str, list[tuple[str, int, int]]]:
    """The parts of a step, each as the functions it is (file name, first and last line), to put samples in."""
    from transformers.integrations import sdpa_attention
    from transformers.models.llama import modeling_llama as llama

    from reef_daemon.runtimes.embedded import decode_kernel, decode_step, precision

    functions = {
        # With the decoding kernels a step is one native call from the embeddings to the logits (decode_step.py);
        # products left in torch's hands are an adapted output head's (and, without the kernels, every layer's).
        "products outside the native step": [
            decode_kernel.DecodeKernel.linear, precision.DecodeLinear.forward,
        ],
        "the native step (layers, final norm, output head)": [
            decode_step.NativeDecodeStep.step, decode_step.NativeDecodeStep.steps,
        ],
        "attention (transformers' path)": [sdpa_attention.sdpa_attention_forward, row_attention],
        "keys and values written (transformers' path)": [BatchCache.update],
        "norms (transformers' path)": [llama.LlamaRMSNorm.forward],
        "rotary embedding": [(llama, "apply_rotary_pos_emb"), llama.LlamaRotaryEmbedding.forward],
        "picking the token": [pick_token, pick_tokens, decode_kernel.DecodeKernel.pick_greedy],
    }  # fmt: skip
    parts: dict[str, list[tuple[str, int, int]]] = {}
    for part, found in functions.items():
        for function in found:
            parts.setdefault(part, []).append(source_span(function))
    return parts


def source_span(function: Any) -> tuple[str, int, int]:
    """The file name and the lines of a function, or of `(module, name)` where a decorator turned the function into
    an object of its own."""
    if isinstance(function, tuple):
        module, name = function
        path = Path(inspect.getsourcefile(module) or "")
        text = path.read_text().splitlines()
        first = next(i for i, line in enumerate(text, 1) if line.startswith(f"def {name}("))
        last = next((i for i, line in enumerate(text[first:], first + 1) if line[:1] not in ("", " ", ")")), len(text))
        return path.name, first, last
    function = inspect.unwrap(function)
    lines, first = inspect.getsourcelines(function)
    return Path(inspect.getsourcefile(function) or "").name, first, first + len(lines)


def part_of(frame: str, parts: dict[str, list[tuple[str, int, int]]]) -> str | None:
    """The part a py-spy frame (`function (path:line)`) belongs to, if any."""
    where = frame.rpartition("(")[2].rstrip(")")
    path, _, line = where.rpartition(":")
    if not line.isdigit():
        return None
    name, number = Path(path).name, int(line)
    for part, spans in parts.items():
        if any(name == file and first <= number < last for file, first, last in spans):
            return part
    return None


MEASURED = 128 * 2**20  # fp32 values summed: 512 MiB, far past the caches


def bandwidth_gb_s(data: torch.Tensor, repeats: int = 9, threads: int | None = None) -> float:
    """Read bandwidth: the median pass summing `data` (fp32) on `threads` threads (None: every thread torch has)."""
    every = torch.get_num_threads()
    torch.set_num_threads(threads or every)
    try:
        seconds = []
        for _ in range(repeats):
            began = time.perf_counter()
            data.sum()
            seconds.append(time.perf_counter() - began)
    finally:
        torch.set_num_threads(every)
    return data.numel() * 4 / statistics.median(seconds) / 1e9


SEPARATE_PATHS = 1.5  # all threads reading at least this many times one thread's bandwidth: each core has its own


@dataclasses.dataclass(frozen=True)
class Round:
    """One stream between two reads of the bandwidth (GB/s, the higher of ordinary memory and huge pages)."""

    before: float
    after: float
    one_thread: float  # on huge pages, just before the stream
    rates: dict[str, float]

    @property
    def bandwidth(self) -> float:
        """What the stream is held to: the higher of the two reads around it."""
        return max(self.before, self.after)

    @property
    def paths(self) -> str:
        """Whether the cores read memory through one path ("shared": two threads read little more than one),
        each through its own ("separate": the host placed them apart, and two threads read about twice what one
        does), or the host moved them during the round ("changed")."""
        apart = [read >= SEPARATE_PATHS * self.one_thread for read in (self.before, self.after)]
        return "separate" if all(apart) else "shared" if not any(apart) else "changed"


def read_round(ordinary: torch.Tensor, huge: torch.Tensor, stream: Callable[[], dict[str, float]]) -> Round:
    """The bandwidth, then `stream`, then the bandwidth again."""
    with torch.inference_mode():
        one_thread = bandwidth_gb_s(huge, threads=1)
        before = max(bandwidth_gb_s(ordinary), bandwidth_gb_s(huge))
        rates = stream()
        after = max(bandwidth_gb_s(ordinary), bandwidth_gb_s(huge))
    return Round(before, after, one_thread, rates)


def decode_bytes(model: Any) -> int:
    """The bytes of weights one decoding step reads: every decode copy (8-bit ones with their scales), the embedding
    rows aside."""
    copies = [m.decode_weight for m in model.modules() if isinstance(m, DecodeLinear)]
    return sum(t.numel() * t.element_size() for t in copies)


def stream_rates(url: str, tokens: int, concurrent: int = 1) -> dict[str, float]:
    """`concurrent` greedy streams sent at once: tokens/s of each from its first text delta to its last (the
    median), and all their tokens over the wall time from sending to the last byte."""
    from embedded_model import one_stream

    async def run() -> tuple[list[dict[str, float]], float]:
        async with httpx.AsyncClient(headers={"x-reef-scenario": "bench-profile"}, timeout=600) as client:
            began = time.perf_counter()
            streams = await asyncio.gather(*(one_stream(client, url, tokens) for _ in range(concurrent)))
            return list(streams), time.perf_counter() - began

    streams, wall = asyncio.run(run())
    return {
        "decoding": statistics.median(timed["tok_s"] for timed in streams),
        "client": sum(timed["tokens"] for timed in streams) / wall,
    }


def profile(py_spy: str, pid: int, raw: Path, run: Callable[[], object]) -> collections.Counter[str]:
    """py-spy over the daemon while `run` runs; the generation thread's samples by part."""
    sampler = subprocess.Popen(
        [py_spy, "record", "--pid", str(pid), "--format", "raw", "--rate", "200", "--threads", "--nonblocking",
         "--output", str(raw)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(1.0)  # py-spy attaches
    run()
    sampler.send_signal(signal.SIGINT)
    sampler.wait(timeout=60)
    known = step_parts()
    parts: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if "_serve (" not in stack:
            continue  # another thread, or the generation thread waiting for work
        if "_decode_step (" in stack:
            frames = stack.split(";")
            part = next((found for frame in reversed(frames) if (found := part_of(frame, known))), None)
            parts[part or "the rest of a step (Python between them)"] += int(count)
        elif "_read_turn (" in stack:
            parts["reading the prompt"] += int(count)
        else:
            parts["handing tokens over, waiting for work"] += int(count)
    return parts


def summary(name: str, rounds: list[Round], key: str, weights: int, fp16_weights: int) -> str:
    """A table row: the rounds' median tokens/s, and their shares of the bound and of the fp16 copies' bound."""
    shares = sorted(r.rates[key] * weights / (r.bandwidth * 1e9) for r in rounds)
    fp16 = statistics.median(r.rates[key] * fp16_weights / (r.bandwidth * 1e9) for r in rounds)
    median = statistics.median(r.rates[key] for r in rounds)
    return (
        f"| {name} | {len(rounds)} | {median:.1f} | {statistics.median(shares):.0%} ({shares[0]:.0%} to"
        f" {shares[-1]:.0%}) | {fp16:.0%} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=160, help="greedy tokens per stream")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of bandwidth then a timed stream")
    parser.add_argument("--no-profile", action="store_true", help="time only, no py-spy")
    parser.add_argument("--concurrent", type=int, default=1, help="streams sent at once in the profiled run")
    args = parser.parse_args()
    from embedded_model import free_port, start_daemon, wait_ready

    with torch.inference_mode():
        ordinary_memory = torch.ones(MEASURED)
        huge_memory = HugePageArena().empty((MEASURED,), torch.float32).fill_(1.0)
    state = Path(tempfile.mkdtemp(prefix="reef-bench-profile-"))
    weights = decode_bytes(load_model(resolve_source(None), state).model)
    fp16_weights = decode_bytes(load_model(resolve_source(None), state, "fp16").model)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    daemon = start_daemon(state, port)
    try:
        wait_ready(url, daemon)
        stream_rates(url, 8)  # warm-up
        stream = lambda: stream_rates(url, args.tokens)  # noqa: E731
        rounds = [read_round(ordinary_memory, huge_memory, stream) for _ in range(args.rounds)]
        print("| round | read bandwidth before, after (GB/s; one thread) | the cores' paths | bound, tokens/s |"
              " decoding, tokens/s | share |")  # fmt: skip
        print("|---|---|---|---|---|---|")
        for index, each in enumerate(rounds, 1):
            bound = each.bandwidth * 1e9 / weights
            print(
                f"| {index} | {each.before:.1f}, {each.after:.1f} ({each.one_thread:.1f}) | {each.paths} |"
                f" {bound:.0f} | {each.rates['decoding']:.1f} | {each.rates['decoding'] / bound:.0%} |"
            )
        print(f"\ndecode weights {weights / 1e6:.0f} MB (fp16 copies: {fp16_weights / 1e6:.0f} MB)\n")
        print("| one greedy stream | rounds | tokens/s (median) | of the bound (median of rounds; range) |"
              " of fp16 bound |")  # fmt: skip
        print("|---|---|---|---|---|")
        for name, key in (("decoding (first to last token)", "decoding"), ("as a client sees it", "client")):
            groups = {"all": rounds, **{p: [r for r in rounds if r.paths == p] for p in ("shared", "separate")}}
            for group, members in groups.items():
                if members and (group == "all" or len(members) < len(rounds)):
                    print(summary(f"{name}, {group} rounds", members, key, weights, fp16_weights))
        print()
        py_spy = shutil.which("py-spy") or str(HERE / ".venv-bench" / "bin" / "py-spy")
        if args.no_profile or not Path(py_spy).exists():
            return
        streams = "one stream" if args.concurrent == 1 else f"{args.concurrent} streams at once"
        run = lambda: stream_rates(url, args.tokens, args.concurrent)  # noqa: E731
        parts = profile(py_spy, daemon.pid, state / "profile.raw", run)
        total = sum(parts.values()) or 1
        print(f"| the generation thread, {streams} | share of samples |")
        print("|---|---|")
        for part, count in parts.most_common():
            print(f"| {part} | {count / total:.0%} |")
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
