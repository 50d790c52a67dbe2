"""Are the served weights the GGUF's? Every tensor of the shipped GGUF, dequantised by the `gguf` package (the
reference implementation of its block formats), against the fp32 safetensors cache the embedded runtime loads,
and how far the fp16 decoding copies (`precision.py`) round them.

    .venv/bin/python bench/embedded_gguf_weights.py [--state-dir DIR]

Prints a markdown table. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from gguf import GGUFReader
from gguf.quants import dequantize
from safetensors.torch import load_file

from reef_daemon.runtimes.embedded.loading import load_model, resolve_source
from reef_daemon.settings import load_settings

NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def hf_name(name: str) -> str:
    if name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if name == "output_norm.weight":
        return "model.norm.weight"
    match = re.fullmatch(r"blk\.(\d+)\.(\w+)\.weight", name)
    assert match, name
    return f"model.layers.{match[1]}.{NAMES[match[2]]}.weight"


def unpermute(weights: np.ndarray, heads: int) -> np.ndarray:
    """Undo the row order llama.cpp's converter gives q and k (as transformers does when it reads a GGUF)."""
    dim = weights.shape[0] // heads // 2
    return weights.reshape(heads, dim, 2, *weights.shape[1:]).swapaxes(2, 1).reshape(weights.shape)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", type=Path, help="a state directory holding the model cache (default: reef's)")
    state_dir = parser.parse_args().state_dir or load_settings(environ={}).reef.state_dir
    source = resolve_source(None)
    loaded = load_model(source, state_dir)
    served = load_file(str(loaded.weights_dir / "model.safetensors"))
    config = loaded.model.config
    heads = {"attn_q": config.num_attention_heads, "attn_k": config.num_key_value_heads}
    kinds: Counter[str] = Counter()
    equal: Counter[str] = Counter()
    worst: dict[str, float] = {}
    fp16_rel = 0.0
    for tensor in GGUFReader(source.path).tensors:
        reference = dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        reference = reference.reshape(tuple(reversed([int(n) for n in tensor.shape])))
        kind = tensor.name.split(".")[-2]
        if kind in heads:
            reference = unpermute(reference, heads[kind])
        name = hf_name(tensor.name)
        mine = served.get(name, served.get("lm_head.weight")) if name.endswith("embed_tokens.weight") else served[name]
        mine_np = mine.numpy()
        label = tensor.tensor_type.name
        kinds[label] += 1
        equal[label] += int(np.array_equal(mine_np, reference))
        worst[label] = max(worst.get(label, 0.0), float(np.abs(mine_np - reference).max()))
        if mine.dim() == 2:
            rounded = mine.to(torch.float16).float()
            fp16_rel = max(fp16_rel, float((rounded - mine).abs().max() / mine.abs().max()))
    print("| GGUF type | tensors | bitwise equal to the served fp32 | largest difference |")
    print("|---|---|---|---|")
    for label in sorted(kinds):
        print(f"| {label} | {kinds[label]} | {equal[label]} | {worst[label]:.3g} |")
    print(f"\nfp16 decoding copies: largest rounding, relative to the tensor's largest weight: {fp16_rel:.2g}")


if __name__ == "__main__":
    main()
