"""Decoding from fp16 copies of the weights, while everything else stays fp32.

A CPU decodes one token at a time by reading every weight once, so its speed is bound by the bytes read: fp16
copies of the linear layers' weights roughly double the tokens/s (measured here: ~18 tok/s fp32, ~50 with the
copies). Multi-token steps (prompt prefill) run on the fp32 weights, where fp16 matrix products are slow on CPU.
The fp32 weights remain the model's state (what is cached, swapped and trained); the copies follow them.
Decoding steps multiply with the kernel of `decode_kernel.py` (packed copies, fp32 sums, one pass over the weights for
all the batch's rows), or, where it cannot be built, with torch's fp16 product. Either way a row gets the same result
whatever the number of rows beside it. Per-token log-probs differ from pure fp32 by less than 0.01 nats on SmolLM2.
"""

from __future__ import annotations

from collections.abc import Collection

import torch
import torch.nn.functional as F
from torch import nn

from reef_daemon.runtimes.embedded.decode_kernel import DecodeKernel, load_kernel

DECODE_ROWS = 4  # inputs with at most this many positions per sequence use the fp16 copy


class DecodeLinear(nn.Module):
    """An `nn.Linear` (same parameters, same state-dict names) with a copy of its weight for decoding: fp16, or with
    the kernels and `int8`, bytes and their scales (`embedded.decode-weights`)."""

    decode_weight: torch.Tensor  # the kernel's packed panels, or (without the kernel) the weight in fp16
    decode_scales: torch.Tensor | None  # the int8 panels' scales; None for fp16

    def __init__(self, linear: nn.Linear, kernel: DecodeKernel | None, int8: bool = False) -> None:
        super().__init__()
        self.weight = linear.weight
        self.bias = linear.bias
        self._kernel = kernel
        self._int8 = int8 and kernel is not None
        weight, scales = self._decode_copy()
        self.register_buffer("decode_weight", weight, persistent=False)
        self.register_buffer("decode_scales", scales, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = x.shape[-2] if x.dim() > 2 else x.shape[0]  # [batch, positions, features] or [positions, ...]
        if positions > DECODE_ROWS:
            return F.linear(x, self.weight, self.bias)
        if self._kernel is None:
            out = F.linear(x.to(torch.float16), self.decode_weight).to(x.dtype)
        else:
            rows = x.reshape(-1, x.shape[-1]).to(torch.float32)
            out = self._kernel.linear(rows, self.decode_weight, self.weight.shape[0], scales=self.decode_scales)
            out = out.view(*x.shape[:-1], -1).to(x.dtype)
        return out if self.bias is None else out + self.bias

    def refresh(self) -> None:
        """Make the decoding copy follow the fp32 weight after it changed."""
        weight, scales = self._decode_copy()
        with torch.no_grad():
            self.decode_weight.copy_(weight)
            if self.decode_scales is not None and scales is not None:
                self.decode_scales.copy_(scales)

    def _decode_copy(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The decoding copy of the weight and, for int8, its scales."""
        weight = self.weight.detach()
        if self._kernel is None:
            return weight.to(torch.float16), None
        if self._int8:
            return self._kernel.pack_int8(weight)
        return self._kernel.pack(weight), None


def add_decode_copies(model: nn.Module, int8: bool = False) -> None:
    """Replace every `nn.Linear` in the model by a `DecodeLinear` over the same parameters."""
    kernel = load_kernel()
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is nn.Linear:
                setattr(module, name, DecodeLinear(child, kernel, int8))


def refresh_decode_copies(model: nn.Module, changed: Collection[str]) -> None:
    """After a weight swap: refresh the copies of the layers whose weights changed (given by state-dict name;
    a weight tied to another, like an output head tied to the embeddings, counts under either name)."""
    touched = {id(p) for name, p in model.named_parameters(remove_duplicate=False) if name in changed}
    for module in model.modules():
        if isinstance(module, DecodeLinear) and id(module.weight) in touched:
            module.refresh()
