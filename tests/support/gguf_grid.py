"""Weights as a GGUF's quantised blocks dequantise to, for the decoding copies' tests."""

from __future__ import annotations

import torch

from reef_daemon.runtimes.embedded.decode_kernel import BLOCK


def on_a_gguf_grid(outputs: int, inputs: int, kind: str, generator: torch.Generator) -> torch.Tensor:
    """fp32 weights as a GGUF's blocks of 32 dequantise to, made as llama.cpp's quantiser makes them: Q4_1 is
    d * q + m for q in 0..15, the block's minimum at q = 0 and its maximum at q = 15; Q8_0 is d * q for q in
    -127..127, the largest magnitude at 127; d and m in fp16."""
    blocks = -(-inputs // BLOCK)

    def per_block(values: torch.Tensor) -> torch.Tensor:
        return values.to(torch.float16).float().repeat_interleave(BLOCK, 1)[:, :inputs]

    if kind == "q4_1":
        q = torch.randint(0, 16, (outputs, blocks * BLOCK), generator=generator)
        q[:, ::BLOCK], q[:, 1::BLOCK] = 0, 15
        d = per_block(torch.rand(outputs, blocks, generator=generator) * 0.01 + 1e-4)
        m = per_block(-torch.rand(outputs, blocks, generator=generator) * 0.08)
        return q[:, :inputs].float() * d + m
    q = torch.randint(-127, 128, (outputs, blocks * BLOCK), generator=generator)
    q[:, ::BLOCK] = 127 * torch.sign(torch.randn(outputs, blocks, generator=generator))
    return q[:, :inputs].float() * per_block(torch.rand(outputs, blocks, generator=generator) * 0.002 + 1e-5)
