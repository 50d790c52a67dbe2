"""Where one stream's decoding time goes on the embedded model, and the memory bound it is held to.

In one process, one after the other on the same machine:
1. the read bandwidth: the best of several passes summing a 512 MiB fp32 tensor (torch, all threads);
2. the bound: that bandwidth over the bytes a decoding step reads (every decode weight once), as tokens/s;
3. a greedy decoding loop of one sequence (the worker's batch of one row, `pick_token` for each token), timed per
   step through the model's own forward (`model(...)`) and through `decode_step` (the step written out), in
   alternating blocks;
4. py-spy over each loop (`--format raw`), its samples put in the parts of a step: the linear layers' products,
   attention, the norms, the rotary embedding, writing keys and values, picking the token, and the rest (the
   Python between them).

    .venv/bin/python bench/embedded_decode_profile.py [--tokens 160] [--threads 2] [--no-profile]

Needs py-spy (bench/.venv-bench/bin/py-spy; `bench/.venv-bench/bin/pip install py-spy`) and permission to ptrace
(root, or kernel.yama.ptrace_scope=0). Prints markdown tables. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import collections
import inspect
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from reef_daemon.runtimes.embedded.batch import BatchCache
from reef_daemon.runtimes.embedded.decode_step import decode_step
from reef_daemon.runtimes.embedded.loading import load_model, resolve_source
from reef_daemon.runtimes.embedded.precision import DecodeLinear
from reef_daemon.runtimes.embedded.sampling import SamplingParams, pick_token
from reef_daemon.runtimes.embedded.templating import ChatTurn, render_prompt

HERE = Path(__file__).resolve().parent
PROMPT = "Write a long story about a dog who learns to sail."


def step_parts() -> dict[str, list[tuple[str, int, int]]]:
    """The parts of a step, each as the functions it is (file name, first and last line), to put samples in."""
    from transformers.integrations import sdpa_attention
    from transformers.models.llama import modeling_llama as llama

    from reef_daemon.runtimes.embedded import half_kernel, precision

    functions = {
        "products (linear layers)": [half_kernel.HalfKernel.linear, precision.DecodeLinear.forward],
        "attention": [sdpa_attention.sdpa_attention_forward],
        "keys and values written": [BatchCache.update],
        "norms": [llama.LlamaRMSNorm.forward],
        "rotary embedding": [(llama, "apply_rotary_pos_emb"), llama.LlamaRotaryEmbedding.forward],
        "picking the token": [pick_token],
    }
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


def bandwidth_gb_s(repeats: int = 8) -> float:
    """Read bandwidth: the best pass summing 512 MiB of fp32 (every thread torch has)."""
    data = torch.ones(128 * 2**20)
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        data.sum()
        best = min(best, time.perf_counter() - began)
    return data.numel() * 4 / best / 1e9


def decode_bytes(model: Any) -> int:
    """The bytes of weights one decoding step reads: every decode copy, the embedding rows aside."""
    return sum(
        m.decode_weight.numel() * m.decode_weight.element_size() for m in model.modules() if isinstance(m, DecodeLinear)
    )


def prompt_batch(model: Any, tokenizer: Any) -> tuple[BatchCache, int]:
    from transformers import DynamicCache

    ids = render_prompt(tokenizer, [ChatTurn("user", PROMPT)])
    cache = DynamicCache(config=model.config)
    out = model(input_ids=torch.tensor([ids]), cache=cache, use_cache=True, logits_to_keep=1)
    batch = BatchCache()
    batch.add(cache)
    return batch, int(out.logits[0, -1].argmax())


def through_model(model: Any, batch: BatchCache, token: int) -> torch.Tensor:
    positions, mask = batch.step_inputs()
    out = model(
        input_ids=torch.tensor([[token]]), position_ids=positions, attention_mask=mask, cache=batch,
        use_cache=True, logits_to_keep=1,
    )  # fmt: skip
    batch.advance()
    return out.logits[:, -1]


def written_out(model: Any, batch: BatchCache, token: int) -> torch.Tensor:
    batch.step_inputs()
    logits = decode_step(model, [token], batch)
    batch.advance()
    return logits


STEPS: dict[str, Callable[[Any, BatchCache, int], torch.Tensor]] = {
    "model(...)": through_model,
    "decode_step": written_out,
}


def decode(
    model: Any, tokenizer: Any, step: Callable[[Any, BatchCache, int], torch.Tensor], tokens: int
) -> tuple[list[float], list[int]]:
    """Greedy tokens of one sequence, and each step's seconds (the step and the pick)."""
    batch, token = prompt_batch(model, tokenizer)
    params, generator = SamplingParams(max_tokens=tokens, temperature=0.0), torch.Generator()
    times, out = [], [token]
    for _ in range(tokens):
        began = time.perf_counter()
        logits = step(model, batch, token)
        token, _logprob = pick_token(logits[0], params, generator)
        times.append(time.perf_counter() - began)
        out.append(token)
    return times, out


def profile(py_spy: str, seconds_file: Path, run: Callable[[], object]) -> collections.Counter[str]:
    """py-spy over this process while `run` runs; samples by part of the step."""
    raw = seconds_file.with_suffix(".raw")
    sampler = subprocess.Popen(
        [py_spy, "record", "--pid", str(os.getpid()), "--format", "raw", "--rate", "200", "--output", str(raw)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(1.0)  # py-spy attaches
    run()
    sampler.send_signal(2)
    sampler.wait(timeout=60)
    known = step_parts()
    parts: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if "decode (" not in stack or "reef-generation" in stack:
            continue  # py-spy's own waiting, or another thread
        frames = stack.split(";")
        part = next((found for frame in reversed(frames) if (found := part_of(frame, known))), None)
        parts[part or "the rest (Python between them)"] += int(count)
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=160, help="greedy tokens per timed loop")
    parser.add_argument("--rounds", type=int, default=3, help="alternating loops of each path")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch threads (the kernel's)")
    parser.add_argument("--no-profile", action="store_true", help="time only, no py-spy")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    loaded = load_model(resolve_source(None), Path(tempfile.mkdtemp()))
    model, tokenizer = loaded.model, loaded.tokenizer
    with torch.inference_mode():
        bandwidth = bandwidth_gb_s()
        weights = decode_bytes(model)
        bound = bandwidth * 1e9 / weights
        rates: dict[str, list[float]] = {name: [] for name in STEPS}
        answers: dict[str, list[int]] = {}
        for _ in range(args.rounds):
            for name, step in STEPS.items():
                times, answers[name] = decode(model, tokenizer, step, args.tokens)
                rates[name].append(1 / statistics.median(times))
        print(f"torch threads: {args.threads}; read bandwidth {bandwidth:.1f} GB/s;", end=" ")
        print(f"decode weights {weights / 1e6:.0f} MB; bound {bound:.0f} tokens/s\n")
        print("| step | tokens/s (median step, best of rounds) | of the bound |")
        print("|---|---|---|")
        for name, measured in rates.items():
            print(f"| {name} | {max(measured):.1f} | {max(measured) / bound:.0%} |")
        print(f"\nsame greedy tokens both ways: {answers['model(...)'] == answers['decode_step']}\n")
        py_spy = shutil.which("py-spy") or str(HERE / ".venv-bench" / "bin" / "py-spy")
        if args.no_profile or not Path(py_spy).exists():
            return
        with tempfile.TemporaryDirectory() as scratch:
            for name, step in STEPS.items():
                parts = profile(
                    py_spy, Path(scratch) / "profile", lambda step=step: decode(model, tokenizer, step, args.tokens)
                )
                total = sum(parts.values()) or 1
                print(f"| {name}: part of a step | share of samples |")
                print("|---|---|")
                for part, count in parts.most_common():
                    print(f"| {part} | {count / total:.0%} |")
                print()


if __name__ == "__main__":
    sys.exit(main())
