"""Decoding from copies of the weights made for it, while everything else stays fp32.

A CPU decodes one token at a time by reading every weight once, so its speed is bound by the bytes read: copies of
the linear layers' weights in fewer bytes decode faster. Multi-token steps (prompt prefill) run on the fp32 weights,
where products in fewer bits are slow on CPU. The fp32 weights remain the model's state (what is cached, swapped and
trained); the copies follow them (`embedded.decode-weights`):
- `auto` (the default): 8-bit copies of the weights that 8 bits hold exactly, fp16 copies of the others. Weights
  read from a GGUF's Q4_1 and Q8_0 blocks are such weights (`decode_pack.c`), so the embedded model decodes from a
  byte and a bit a weight with the very weights that train; a weight that training moves off its grid is decoded
  from fp16 from its next swap on. The 8-bit product takes each input to within 2^-16 of its block's largest
  (integer multiply-adds): log-probs within ~0.005 nats of fp32, about a third of what fp16 copies move them by.
- `fp16`: every weight in fp16 (log-probs within ~0.01 nats of fp32).
- `int8`: every weight in 8 bits, a block's range over 255 where it is not exact (within ~0.02 nats on average).
Decoding steps multiply with the kernels of `decode_kernel.py`, or, where they cannot be built, with torch's fp16
product (fp16 copies then, whatever the setting). Either way a row gets the same result whatever the number of rows
beside it.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from reef_daemon.runtimes.embedded.decode_kernel import DecodeKernel, load_kernel
from reef_daemon.runtimes.embedded.huge_pages import HugePageArena

DECODE_ROWS = 4  # inputs with at most this many positions per sequence use the decoding copy
DecodeWeights = Literal["auto", "fp16", "int8"]  # `embedded.decode-weights`: the copies decoding reads


class DecodeLinear(nn.Module):
    """An `nn.Linear` (same parameters, same state-dict names) with a copy of its weight for decoding: fp16, or (with
    the kernels) bytes and their scales, as `weights` says."""

    decode_weight: torch.Tensor  # the kernel's panels (fp16 or 8-bit), or (without the kernel) the weight in fp16

    def __init__(
        self, linear: nn.Linear, kernel: DecodeKernel | None, weights: DecodeWeights = "auto",
        arena: HugePageArena | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.weight = linear.weight
        self.bias = linear.bias
        self._kernel = kernel
        self._weights = weights
        self._arena = arena  # where the copies are made (memory on huge pages), or None: torch's
        self.register_buffer("decode_weight", self._decode_copy(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = x.shape[-2] if x.dim() > 2 else x.shape[0]  # [batch, positions, features] or [positions, ...]
        if positions > DECODE_ROWS:
            return F.linear(x, self.weight, self.bias)
        if self._kernel is None:
            out = F.linear(x.to(torch.float16), self.decode_weight).to(x.dtype)
        else:
            rows = x.reshape(-1, x.shape[-1]).to(torch.float32)
            out = self._kernel.linear(rows, self.decode_weight, self.weight.shape[0])
            out = out.view(*x.shape[:-1], -1).to(x.dtype)
        return out if self.bias is None else out + self.bias

    @property
    def int8(self) -> bool:
        """Whether decoding reads 8-bit copies of this weight."""
        return self.decode_weight.dtype == torch.uint8

    def refresh(self) -> None:
        """Make the decoding copy follow the fp32 weight after it changed: new tensors, maybe of the other kind
        (what reads them by address, the native step, reads them again: `NativeDecodeStep.follow_weights`)."""
        self.decode_weight = self._decode_copy()

    def _decode_copy(self) -> torch.Tensor:
        """The decoding copy of the weight."""
        weight = self.weight.detach()
        if self._kernel is None:
            if self._arena is None:
                return weight.to(torch.float16)
            return self._arena.empty(tuple(weight.shape), torch.float16).copy_(weight)
        if self._weights != "fp16":
            packed = self._kernel.pack_int8(weight, self._weights == "auto", self._arena)
            if packed is not None:
                return packed.panels
        return self._kernel.pack(weight, self._arena)


def add_decode_copies(model: nn.Module, weights: DecodeWeights = "auto", arena: HugePageArena | None = None) -> None:
    """Replace every `nn.Linear` in the model by a `DecodeLinear` over the same parameters, its copy in `arena` (a
    new one by default: the copies of one model, read together every step)."""
    kernel = load_kernel()
    arena = arena or HugePageArena()
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is nn.Linear:
                setattr(module, name, DecodeLinear(child, kernel, weights, arena))


def decode_copies(model: nn.Module) -> str:
    """What decoding reads, for `reef status`: "int8 weights" or "fp16 weights" when every copy is of one kind, else
    how many weights have 8-bit copies ("int8 for 150 of 211 weights, fp16 for the rest")."""
    layers = [m for m in model.modules() if isinstance(m, DecodeLinear)]
    eight = sum(layer.int8 for layer in layers)
    if eight in (0, len(layers)):
        return "int8 weights" if eight else "fp16 weights"
    return f"int8 for {eight} of {len(layers)} weights, fp16 for the rest"


def refresh_decode_copies(model: nn.Module, changed: Collection[str]) -> None:
    """After a weight swap: refresh the copies of the layers whose weights changed (given by state-dict name;
    a weight tied to another, like an output head tied to the embeddings, counts under either name)."""
    touched = {id(p) for name, p in model.named_parameters(remove_duplicate=False) if name in changed}
    for module in model.modules():
        if isinstance(module, DecodeLinear) and id(module.weight) in touched:
            module.refresh()
