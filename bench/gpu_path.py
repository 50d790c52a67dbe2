"""The torch path on a GPU, with randomly initialised models (no weights travel to a GPU machine): decode tokens/s
at 1 and 8 concurrent sequences, one SAO training step (reef's torch trainer), and the weight sync into a serving
copy, for SmolLM2-135M's shape and a 0.5B (Qwen2.5-0.5B) shape. A benchmark, not a test: it asserts nothing.

    .venv/bin/python bench/gpu_path.py                          # on the GPU, both shapes (~2 min on an H100)
    .venv/bin/python bench/gpu_path.py --device cpu --shapes tiny   # a check of the script itself on a CPU

SGLang and Slime are not measured here (see bench/README.md, "GPU path").
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, DynamicCache, LlamaConfig, Qwen2Config

from recipes.sao.rollout import Rollout
from recipes.sao.settings import TrainingSection
from recipes.sao.trainer import Trainer
from reef_daemon.runtimes.embedded.versions import copy_weights
from reef_daemon.settings import load_settings

SHAPES: dict[str, Any] = {
    "tiny": LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                        num_key_value_heads=2, vocab_size=512, tie_word_embeddings=True),
    "smollm2-135m": LlamaConfig(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                                num_key_value_heads=3, vocab_size=49152, max_position_embeddings=8192,
                                rope_theta=100000.0, tie_word_embeddings=True),
    "qwen2.5-0.5b": Qwen2Config(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                                num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768,
                                rope_theta=1000000.0, tie_word_embeddings=True),
}  # fmt: skip
PROMPT_TOKENS = 128
DECODE_TOKENS = 128
ROLLOUT_TOKENS = 256


@dataclass
class Figures:
    shape: str
    device: str
    parameters: int
    decode_tok_s_1: float
    decode_tok_s_8: float
    step_s: float
    sync_s: float


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def decode_rate(model: Any, batch: int, device: torch.device) -> float:
    """Aggregate tokens/s of greedy decoding `batch` sequences together after a prompt of PROMPT_TOKENS."""
    vocab = model.config.vocab_size
    with torch.no_grad():
        ids = torch.randint(0, vocab, (batch, PROMPT_TOKENS), device=device)
        cache = DynamicCache(config=model.config)
        out = model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
        synchronize(device)
        began = time.perf_counter()
        for _ in range(DECODE_TOKENS):
            token = out.logits[:, -1].argmax(dim=-1, keepdim=True)
            out = model(input_ids=token, cache=cache, use_cache=True, logits_to_keep=1)
        synchronize(device)
    return batch * DECODE_TOKENS / (time.perf_counter() - began)


def measure(name: str, device: torch.device, folder: Path) -> Figures:
    torch.manual_seed(0)
    model: Any = AutoModelForCausalLM.from_config(SHAPES[name]).to(dtype=torch.float32)
    model.save_pretrained(folder)
    serving: Any = model.to(device).eval()
    rates = [decode_rate(serving, batch, device) for batch in (1, 8)]
    settings = load_settings(
        overrides={"training.device": device.type, "training.critic-warmup-steps": "0"}, environ={}
    )
    trainer = Trainer(folder, settings.of(TrainingSection))
    vocab = SHAPES[name].vocab_size
    generator = torch.Generator().manual_seed(1)
    rollout = Rollout(
        record_id="r", report_id="p",
        prompt_ids=tuple(torch.randint(0, vocab, (PROMPT_TOKENS,), generator=generator).tolist()),
        output_ids=tuple(torch.randint(0, vocab, (ROLLOUT_TOKENS,), generator=generator).tolist()),
        logprobs=tuple([-float(torch.log(torch.tensor(float(vocab))))] * ROLLOUT_TOKENS),
        versions=("bench:0",) * ROLLOUT_TOKENS, reward=1.0, group="g",
    )  # fmt: skip
    trainer.step([rollout])  # warm-up (kernels, optimizer state)
    synchronize(device)
    began = time.perf_counter()
    result = trainer.step([rollout])
    synchronize(device)
    step_s = time.perf_counter() - began
    began = time.perf_counter()
    copy_weights(serving, result.weights)
    synchronize(device)
    sync_s = time.perf_counter() - began
    parameters = sum(p.numel() for p in serving.parameters())
    return Figures(name, str(device), parameters, round(rates[0], 1), round(rates[1], 1), round(step_s, 3),
                   round(sync_s, 4))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--shapes", nargs="+", default=["smollm2-135m", "qwen2.5-0.5b"], choices=sorted(SHAPES))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    device = torch.device(args.device)
    figures = []
    for name in args.shapes:
        with tempfile.TemporaryDirectory() as folder:
            figures.append(asdict(measure(name, device, Path(folder))))
        print(json.dumps(figures[-1]), flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
