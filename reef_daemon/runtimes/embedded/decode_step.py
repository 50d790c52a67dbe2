"""A decoding step of a Llama model in native calls: one per decoder layer, where transformers' forward pass makes
~45 small torch calls per layer, whose Python and dispatch cost more than the products once those run at memory
speed.

Each layer runs `reef_decode_layer` of the decoding kernels (`decode_kernel.c`): the input norm, the q/k/v products,
the rotary embedding, the new keys and values written into the batch's cache with attention over each row's own
positions, the output product and the residual, the second norm and the MLP. A step where some row is served by a
LoRA adapter calls the same parts one at a time from here instead, with every product made by its layer module, so
the adapters' hooks add each row's own delta (`adapters.py`); a row without one gets the same bits either way. The
embedding, the rotary angles and the output head (a layer module, so an adapter may target it) run in torch.

The products read the fp16 or int8 copies the layer modules hold (`precision.py`, `embedded.decode-weights`). The
weights are read where they lie: swaps copy into them in place (`versions.copy_weights`,
`precision.refresh_decode_copies`), so the pointers taken at start stay right.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import torch

from reef_daemon.runtimes.embedded.batch import BatchCache
from reef_daemon.runtimes.embedded.decode_kernel import DecodeKernel
from reef_daemon.runtimes.embedded.precision import DecodeLinear

_PRODUCTS = ("q", "k", "v", "o", "gate", "up", "down")
_SCRATCH = ("normed", "q", "k", "v", "attended", "out", "gate", "up")


class _Layer(ctypes.Structure):
    _fields_ = [
        ("input_norm", ctypes.c_void_p), ("post_norm", ctypes.c_void_p),
        *((name, ctypes.c_void_p) for name in _PRODUCTS),
        *((f"{name}_scales", ctypes.c_void_p) for name in _PRODUCTS),
        ("hidden", ctypes.c_int64), ("heads", ctypes.c_int64), ("kv_heads", ctypes.c_int64),
        ("head_dim", ctypes.c_int64), ("intermediate", ctypes.c_int64), ("eps", ctypes.c_float),
        ("scale", ctypes.c_float),
    ]  # fmt: skip


class _Scratch(ctypes.Structure):
    _fields_ = [(name, ctypes.c_void_p) for name in _SCRATCH]


@dataclass(frozen=True)
class _Shape:
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    eps: float

    def widths(self) -> dict[str, int]:
        """The floats a row needs in each scratch buffer."""
        attention, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return {
            "normed": self.hidden, "q": attention, "k": kv, "v": kv, "attended": attention, "out": self.hidden,
            "gate": self.intermediate, "up": self.intermediate,
        }  # fmt: skip


def native_step(model: Any, kernel: DecodeKernel | None) -> NativeDecodeStep | None:
    """The native step for `model`, or None where the kernels cannot step it (no kernel; not a Llama model with SiLU
    and no biases, every product a `DecodeLinear`): transformers' forward pass then decodes."""
    config = getattr(model, "config", None)
    if kernel is None or type(model).__name__ != "LlamaForCausalLM" or config is None:
        return None
    if config.hidden_act != "silu" or config.attention_bias or config.mlp_bias:
        return None
    if float(getattr(model.model.rotary_emb, "attention_scaling", 1.0)) != 1.0:
        return None  # cos and sin would carry the scaling; the kernel assumes they do not (none of reef's models)
    for layer in model.model.layers:
        modules = (*_attention_products(layer), *_mlp_products(layer))
        if not all(isinstance(m, DecodeLinear) and m.bias is None for m in modules):
            return None
    return NativeDecodeStep(model, kernel)


def _attention_products(layer: Any) -> tuple[Any, ...]:
    attention = layer.self_attn
    return attention.q_proj, attention.k_proj, attention.v_proj, attention.o_proj


def _mlp_products(layer: Any) -> tuple[Any, ...]:
    return layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj


class NativeDecodeStep:
    """Steps every row of a `BatchCache` by one token: `logits(tokens, batch, adapted)`."""

    def __init__(self, model: Any, kernel: DecodeKernel) -> None:
        config = model.config
        self._model = model
        self._kernel = kernel
        library = kernel.library
        self._layer_call = library.reef_decode_layer
        self._layer_call.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int,
        ]  # fmt: skip
        self._layer_call.restype = ctypes.c_int
        self._norm = library.reef_rms_norm
        self._norm.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_float,
                               ctypes.c_void_p]  # fmt: skip
        self._rope = library.reef_rope
        self._rope.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                               ctypes.c_void_p]  # fmt: skip
        self._silu_mul = library.reef_silu_mul
        self._silu_mul.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        self._add = library.reef_add
        self._add.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        for function in (self._norm, self._rope, self._silu_mul, self._add):
            function.restype = None
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self._shape = _Shape(
            config.hidden_size, config.num_attention_heads, config.num_key_value_heads, head_dim,
            config.intermediate_size, float(config.rms_norm_eps),
        )  # fmt: skip
        self._scale = head_dim**-0.5
        self._layers = [self._describe(layer) for layer in model.model.layers]
        self._scratch: dict[str, torch.Tensor] = {}

    def _describe(self, layer: Any) -> _Layer:
        shape = self._shape
        products = (*_attention_products(layer), *_mlp_products(layer))
        weights = [m.decode_weight.data_ptr() for m in products]
        scales = [None if m.decode_scales is None else m.decode_scales.data_ptr() for m in products]
        return _Layer(
            layer.input_layernorm.weight.data_ptr(), layer.post_attention_layernorm.weight.data_ptr(), *weights,
            *scales, shape.hidden, shape.heads, shape.kv_heads, shape.head_dim, shape.intermediate, shape.eps,
            self._scale,
        )  # fmt: skip

    def logits(self, tokens: list[int], batch: BatchCache, adapted: bool) -> torch.Tensor:
        """The next-token logits `[rows, vocab]` of every row, whose last tokens are `tokens`; the new keys and values
        go into `batch`, which the caller then advances. With `adapted`, some row is served by an adapter."""
        rows = len(tokens)
        model = self._model.model
        positions = batch.step_positions()
        hidden = model.embed_tokens(torch.tensor(tokens)).to(torch.float32).contiguous()  # [rows, hidden]
        cos, sin = (t.reshape(rows, -1).contiguous() for t in model.rotary_emb(hidden, positions.unsqueeze(1)))
        scratch = self._room(rows)
        pointers = _Scratch(*(scratch[name].data_ptr() for name in _SCRATCH))
        threads = torch.get_num_threads()
        for index, (layer, described) in enumerate(zip(model.layers, self._layers, strict=True)):
            keys, values = batch.keys[index], batch.values[index]
            if not adapted:
                failed = self._layer_call(
                    ctypes.byref(described), hidden.data_ptr(), rows, cos.data_ptr(), sin.data_ptr(),
                    keys.data_ptr(), values.data_ptr(), positions.data_ptr(), keys.shape[2], ctypes.byref(pointers),
                    threads,
                )  # fmt: skip
                if failed:
                    raise MemoryError("decoding: no memory for the attention scores")
            else:
                self._layer_in_parts(layer, hidden, cos, sin, keys, values, positions, scratch)
        normed = torch.empty_like(hidden)
        self._norm(hidden.data_ptr(), rows, self._shape.hidden, model.norm.weight.data_ptr(), self._shape.eps,
                   normed.data_ptr())  # fmt: skip
        logits: torch.Tensor = self._model.lm_head(normed.unsqueeze(1))[:, 0]  # a decoding product's shape
        return logits

    def _layer_in_parts(
        self, layer: Any, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, keys: torch.Tensor,
        values: torch.Tensor, positions: torch.Tensor, scratch: dict[str, torch.Tensor],
    ) -> None:  # fmt: skip
        """`reef_decode_layer`'s parts in its order, each product by its layer module (and so its adapter hooks)."""
        shape, rows = self._shape, hidden.shape[0]
        normed = scratch["normed"]
        q_proj, k_proj, v_proj, o_proj = _attention_products(layer)
        gate_proj, up_proj, down_proj = _mlp_products(layer)
        self._norm(hidden.data_ptr(), rows, shape.hidden, layer.input_layernorm.weight.data_ptr(), shape.eps,
                   normed.data_ptr())  # fmt: skip
        q, k, v = (self._product(module, normed) for module in (q_proj, k_proj, v_proj))
        self._rope(q.data_ptr(), rows, shape.heads, shape.head_dim, cos.data_ptr(), sin.data_ptr())
        self._rope(k.data_ptr(), rows, shape.kv_heads, shape.head_dim, cos.data_ptr(), sin.data_ptr())
        as_heads = (rows, -1, 1, shape.head_dim)
        attended = self._kernel.attend(
            q.view(as_heads), k.view(as_heads), v.view(as_heads), keys, values, positions, self._scale
        )
        out = self._product(o_proj, attended.view(rows, -1))  # held: a pointer does not keep a tensor alive
        self._add(hidden.data_ptr(), out.data_ptr(), hidden.numel())
        self._norm(hidden.data_ptr(), rows, shape.hidden, layer.post_attention_layernorm.weight.data_ptr(),
                   shape.eps, normed.data_ptr())  # fmt: skip
        gate, up = self._product(gate_proj, normed), self._product(up_proj, normed)
        self._silu_mul(gate.data_ptr(), up.data_ptr(), gate.numel())
        out = self._product(down_proj, gate)
        self._add(hidden.data_ptr(), out.data_ptr(), hidden.numel())

    @staticmethod
    def _product(module: Any, rows: torch.Tensor) -> torch.Tensor:
        """`module` on one position per row (a decoding product), `[rows, out]` contiguous fp32."""
        out: torch.Tensor = module(rows.unsqueeze(1))[:, 0]
        return out.contiguous()

    def _room(self, rows: int) -> dict[str, torch.Tensor]:
        """Scratch buffers for `rows` rows, kept between steps (grown when the batch grows)."""
        if not self._scratch or self._scratch["normed"].shape[0] < rows:
            self._scratch = {name: torch.empty(rows, width) for name, width in self._shape.widths().items()}
        return {name: buffer[:rows] for name, buffer in self._scratch.items()}
