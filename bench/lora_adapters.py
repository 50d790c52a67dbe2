"""LoRA adapters against full weights on the embedded model (SmolLM2-135M, CPU).

- memory: the bytes one resident adapter adds to the server (its fp32 A and B matrices), and a checkpoint's size
  (the adapter and the value head, safetensors) against a full-weights one (the top 4 blocks, the final norm and the
  value head);
- swap: the time from handing new weights to the generation worker to the new version serving (idle worker);
- step: one SAO training step (critic warm-up off, one rollout of `--rollout-tokens` tokens) with each policy;
- decode: aggregate tokens/s of 8 concurrent greedy streams of `--max-tokens` tokens, all on the base, and with the
  rows spread over 1, 4 and 8 different adapters (each stream's scenario picks its adapter); the best of 3
  interleaved rounds.

    .venv/bin/python bench/lora_adapters.py [--max-tokens 48] [--rollout-tokens 32] [--threads 1]

Prints a markdown table and writes bench/results/<time>-lora.json. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STORY = "Write a long story about a dog who learns to sail."
STREAMS = 8
ROUNDS = 3
_STORIES = itertools.count()  # numbers the prompts, so that no two streams share one


def random_adapter(base: Any, seed: int) -> dict[str, Any]:
    """A trained-looking adapter (B != 0) for the served model, as PEFT names it."""
    import torch

    policy = base.policy(f"bench-{seed}")
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in policy.trainable.items():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.02)
    weights: dict[str, Any] = policy.weights()
    return weights


async def decode(worker: Any, tokenizer: Any, scenarios: list[str | None], max_tokens: int) -> float:
    """Aggregate tokens/s of one greedy stream per scenario, all submitted at once, each with a prompt of its own
    (new to the worker: every stream reads its prompt, whichever weights serve it)."""
    from reef_daemon.runtimes.embedded.job import Finished, Job
    from reef_daemon.runtimes.embedded.sampling import SamplingParams
    from reef_daemon.runtimes.embedded.templating import ChatTurn, render_prompt
    from reef_daemon.runtimes.embedded.text import TextAssembler

    loop = asyncio.get_running_loop()
    jobs = [
        Job(render_prompt(tokenizer, [ChatTurn("user", f"{STORY} (Story {next(_STORIES)}.)")]),
            SamplingParams(max_tokens=max_tokens, temperature=0.0), TextAssembler(tokenizer, ()), loop, "",
            scenario=scenario)
        for scenario in scenarios
    ]  # fmt: skip
    began = time.perf_counter()
    for job in jobs:
        worker.submit(job)
    for job in jobs:
        while not isinstance(await job.events.get(), Finished):
            pass
    return sum(len(job.output_ids) for job in jobs) / (time.perf_counter() - began)


async def measure(max_tokens: int, rollout_tokens: int, threads: int | None) -> dict[str, Any]:
    import torch
    from safetensors.torch import save

    from recipes.sao.policy import LoraBase
    from recipes.sao.rollout import Rollout
    from recipes.sao.settings import TrainingSection
    from recipes.sao.trainer import Trainer
    from reef_daemon.runtimes.embedded.adapters import LoraAdapter, lora_layers
    from reef_daemon.runtimes.embedded.loading import load_model, resolve_source
    from reef_daemon.runtimes.embedded.stopping import end_ids
    from reef_daemon.runtimes.embedded.worker import GenerationWorker
    from reef_daemon.runtimes.model_cache import user_model_cache

    if threads:
        torch.set_num_threads(threads)
    loaded = load_model(resolve_source(None), user_model_cache().parent)
    worker = GenerationWorker(
        loaded, end_ids(loaded.tokenizer, loaded.model.generation_config), Path("/tmp/reef-bench-spill")
    )
    worker.start()
    training = TrainingSection(critic_warmup_steps=0)
    results: dict[str, Any] = {"threads": torch.get_num_threads(), "max_tokens": max_tokens}

    lora_base = LoraBase(loaded.weights_dir, training, torch.device("cpu"))
    adapters = [random_adapter(lora_base, seed) for seed in range(8)]
    scale = training.lora_alpha / training.lora_rank
    one = LoraAdapter("a0", "", scale, lora_layers(adapters[0]))
    results["adapter_bytes"] = one.nbytes
    for index, state in enumerate(adapters):
        began = time.perf_counter()
        await asyncio.wrap_future(worker.swap(LoraAdapter(f"a{index}", "", scale, lora_layers(state))))
        results.setdefault("lora_swap_s", []).append(time.perf_counter() - began)

    prompt = loaded.tokenizer.encode("The capital of France is")
    rollout = Rollout("r", "p", tuple(prompt), tuple(range(100, 100 + rollout_tokens)), (-2.0,) * rollout_tokens,
                      ("x:0",) * rollout_tokens, 1.0, "g")  # fmt: skip
    lora_trainer = Trainer(loaded.weights_dir, training, policy=lora_base.policy("step"))
    full_trainer = Trainer(loaded.weights_dir, training)
    for name, trainer in (("lora", lora_trainer), ("full", full_trainer)):
        trainer.step([rollout])  # warm
        began = time.perf_counter()
        result = trainer.step([rollout])
        results[f"{name}_step_s"] = time.perf_counter() - began
        results[f"{name}_checkpoint_bytes"] = len(save({k: v.contiguous() for k, v in trainer.state().items()}))
        if name == "full":
            served = dict(loaded.model.named_parameters())
            original = {key: served[key].detach().clone() for key in result.weights}
            began = time.perf_counter()
            await asyncio.wrap_future(worker.swap(result.weights))
            results["full_swap_s"] = time.perf_counter() - began

    # The full swap changed the base: put the served weights back before decoding.
    await asyncio.wrap_future(worker.swap(original))
    for index, state in enumerate(adapters):  # fresh versions over the restored base
        await asyncio.wrap_future(worker.swap(LoraAdapter(f"a{index}", "", scale, lora_layers(state))))
    spreads: dict[str, list[str | None]] = {
        "base": [None] * STREAMS,
        "1 adapter": ["a0"] * STREAMS,
        "4 adapters": [f"a{row % 4}" for row in range(STREAMS)],
        "8 adapters": [f"a{row}" for row in range(STREAMS)],
    }
    await decode(worker, loaded.tokenizer, [None], 4)  # warm
    for _ in range(ROUNDS):  # interleaved, the best of each: the machine's other load comes and goes
        for label, scenarios in spreads.items():
            speed = await decode(worker, loaded.tokenizer, scenarios, max_tokens)
            results[f"decode {label}"] = max(results.get(f"decode {label}", 0.0), speed)
    worker.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--rollout-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    results = asyncio.run(measure(args.max_tokens, args.rollout_tokens, args.threads))
    base = results["decode base"]
    print("| figure | value |\n| --- | --- |")
    print(f"| resident memory per adapter (rank 8, q/k/v/o) | {results['adapter_bytes'] / 1e6:.2f} MB |")
    for name in ("lora", "full"):
        print(f"| checkpoint, {name} | {results[f'{name}_checkpoint_bytes'] / 1e6:.1f} MB |")
        print(f"| SAO step, {name} | {results[f'{name}_step_s']:.2f} s |")
    swaps = sorted(results["lora_swap_s"])
    print(f"| swap, lora (median of 8) | {swaps[len(swaps) // 2] * 1000:.1f} ms |")
    print(f"| swap, full | {results['full_swap_s'] * 1000:.1f} ms |")
    for label in ("base", "1 adapter", "4 adapters", "8 adapters"):
        speed = results[f"decode {label}"]
        print(f"| decode, {STREAMS} streams, {label} | {speed:.1f} tok/s ({speed / base:.0%} of the base) |")
    out = ROOT / "bench" / "results" / f"{time.strftime('%Y%m%d-%H%M%S')}-lora.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
