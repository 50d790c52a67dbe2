"""Decoding from copies of the weights made for it, while everything else stays fp32.

A CPU decodes one token at a time by reading every weight once, so its speed is bound by the bytes read: copies of
the linear layers' weights in fewer bytes decode faster. Multi-token steps (prompt prefill) run on the fp32 weights,
where products in fewer bits are slow on CPU. The fp32 weights remain the model's state (what is cached, swapped and
trained); the copies follow them (`embedded.decode-weights`):
- `auto` (the default): copies in the fewest bits that hold a weight exactly: 4-bit copies of the weights whose
  blocks are on 16 steps of a grid (a GGUF's Q4_1 blocks), 8-bit copies of those on 256 steps (Q8_0 blocks), fp16
  copies of the others (`decode_pack.c`). So the embedded model decodes from about 5 bits a weight (its head from 9)
  with the very weights that train; a weight that training moves off its grid is decoded from fp16 from its next
  swap on. The 4-bit and 8-bit products take each input to within 2^-16 of its block's largest (integer
  multiply-adds, the same bits from either): log-probs within ~0.005 nats of fp32, about a third of what fp16
  copies move them by.
- `fp16`: every weight in fp16 (log-probs within ~0.01 nats of fp32).
- `int8`: every weight in 8 bits, a block's range over 255 where it is not exact (within ~0.02 nats on average).
Decoding steps multiply with the kernels of `decode_kernel.py`, or, where they cannot be built, with torch's fp16
product (fp16 copies then, whatever the setting). Either way a row gets the same result whatever the number of rows
beside it.
"""

from __future__ import annotations

from collections import Counter
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
    the kernels) bytes or nibbles and their scales, as `weights` says."""

    decode_weight: torch.Tensor  # the kernel's panels (fp16, 8-bit or 4-bit), or (no kernel) the weight in fp16

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
    def copy_format(self) -> str:
        """What decoding reads of this weight: "int4", "int8" or "fp16" copies."""
        return "fp16" if self._kernel is None else self._kernel.format_of(self.decode_weight)

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
        if self._weights == "int8":
            return self._kernel.pack_int8(weight, arena=self._arena).panels
        if self._weights == "auto":
            # Packed where the copies live: a swap makes copies of the same shapes, which take the rooms given back.
            exact = self._kernel.pack_int8(weight, exact_only=True, arena=self._arena)
            if exact is not None:
                nibbles = self._kernel.pack_int4(exact.panels, self._arena)
                return exact.panels if nibbles is None else nibbles
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
    """What decoding reads, for `reef status`: "int4 weights" when every copy is of one kind, else how many weights
    have copies of each kind, fewest bits first ("int4 for 210 of 211 weights, int8 for the rest"; "int4 for 150 of
    211 weights, int8 for 1, fp16 for the rest")."""
    layers = [m for m in model.modules() if isinstance(m, DecodeLinear)]
    counts = Counter(layer.copy_format for layer in layers)
    kinds = [kind for kind in ("int4", "int8", "fp16") if counts[kind]]
    if len(kinds) <= 1:
        return f"{kinds[0] if kinds else 'fp16'} weights"
    first, *middle, last = kinds
    parts = [f"{first} for {counts[first]} of {len(layers)} weights", *(f"{k} for {counts[k]}" for k in middle)]
    return ", ".join([*parts, f"{last} for the rest"])


def refresh_decode_copies(model: nn.Module, changed: Collection[str]) -> None:
    """After a weight swap: refresh the copies of the layers whose weights changed (given by state-dict name;
    a weight tied to another, like an output head tied to the embeddings, counts under either name)."""
    touched = {id(p) for name, p in model.named_parameters(remove_duplicate=False) if name in changed}
    for module in model.modules():
        if isinstance(module, DecodeLinear) and id(module.weight) in touched:
            module.refresh()
