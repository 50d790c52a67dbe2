"""A decoding step of a Llama model in one native call, where transformers' forward pass makes ~45 small torch calls
per layer, whose Python and dispatch cost more than the products once those run at memory speed.

`reef_decode_step` of the decoding kernels (`decode_kernel.c`) takes each row's embedding, runs each layer (the
input norm, the q/k/v products, the rotary embedding, the new keys and values written into the batch's cache with
attention over each row's own positions, the output product and the residual, the second norm and the MLP), the
final norm and the output head. A row served by a LoRA adapter gets its adapter's delta on each product it adapts
inside that call (its A and B read where the adapter holds them), so a row's bits do not depend on the rows beside
it, adapted or not; where a row's adapter adapts the output head, the head runs in torch, as a layer module whose
hook adds the delta. Rows decoded greedily get their picks in that call too (the token and its log-prob, as
`DecodeKernel.pick_greedy` makes them); rows all decoded greedily can take several steps in one call (`steps`), each
step's picks the next one's tokens. The rotary cos and sin are rows of a table the model's rotary embedding made
for every position once (a position's values are the same made alone or with others).

The products read the fp16, int8 or int4 copies the layer modules hold (`precision.py`, `embedded.decode-weights`),
where they lie: a swap copies the fp32 weights in place (`versions.copy_weights`) but makes new copies, maybe of
another kind (`precision.refresh_decode_copies`), so after one the step takes their addresses again
(`follow_weights`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, NoReturn

import torch

from reef_daemon.runtimes.embedded.adapters import LoraAdapter
from reef_daemon.runtimes.embedded.batch import BatchCache
from reef_daemon.runtimes.embedded.decode_kernel import FORMATS, DecodeKernel, kernel_threads
from reef_daemon.runtimes.embedded.precision import DecodeLinear

_PRODUCTS = ("q", "k", "v", "o", "gate", "up", "down")
_SCRATCH = ("normed", "q", "k", "v", "attended", "out", "gate", "up")


class _Layer(ctypes.Structure):
    _fields_ = [
        ("input_norm", ctypes.c_void_p), ("post_norm", ctypes.c_void_p),
        *((name, ctypes.c_void_p) for name in _PRODUCTS),
        *((f"{name}_format", ctypes.c_int) for name in _PRODUCTS),
        ("hidden", ctypes.c_int64), ("heads", ctypes.c_int64), ("kv_heads", ctypes.c_int64),
        ("head_dim", ctypes.c_int64), ("intermediate", ctypes.c_int64), ("eps", ctypes.c_float),
        ("scale", ctypes.c_float),
    ]  # fmt: skip


class _Lora(ctypes.Structure):
    _fields_ = [("a", ctypes.c_void_p), ("b", ctypes.c_void_p), ("rank", ctypes.c_int64), ("scale", ctypes.c_float)]


_LORA_ROWS = ctypes.POINTER(_Lora)
_LAYER_LORA = ctypes.POINTER(_LORA_ROWS)
ROTARY_ROWS = 1024  # the rotary table grows by this many positions at a time
_MODULE_PATHS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                 "mlp.up_proj", "mlp.down_proj")  # fmt: skip  # the order of a layer's products in the kernel
_HEAD = "lm_head"  # the output head's module path, as an adapter names the layers it adapts
ADAPTERS_KEPT = 32  # adapters whose per-layer pairs are kept between steps (the worker keeps 8 resident)


class _Scratch(ctypes.Structure):
    _fields_ = [(name, ctypes.c_void_p) for name in _SCRATCH]


class _Model(ctypes.Structure):
    _fields_ = [
        ("layers", ctypes.POINTER(_Layer)), ("count", ctypes.c_int64), ("embedding", ctypes.c_void_p),
        ("final_norm", ctypes.c_void_p), ("head", ctypes.c_void_p), ("head_format", ctypes.c_int),
        ("vocab", ctypes.c_int64), ("eps", ctypes.c_float),
    ]  # fmt: skip


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
    """The native step for `model`, or None where the kernels cannot step it (no kernel; not a Llama model with SiLU,
    no biases, every product and the head a `DecodeLinear`, fp32 embeddings): transformers' forward pass then
    decodes."""
    config = getattr(model, "config", None)
    if kernel is None or type(model).__name__ != "LlamaForCausalLM" or config is None:
        return None
    if config.hidden_act != "silu" or config.attention_bias or config.mlp_bias:
        return None
    if float(getattr(model.model.rotary_emb, "attention_scaling", 1.0)) != 1.0:
        return None  # cos and sin would carry the scaling; the kernel assumes they do not (none of reef's models)
    embedding = model.model.embed_tokens.weight
    if embedding.dtype != torch.float32 or not embedding.is_contiguous():
        return None
    for layer in model.model.layers:
        modules = (*_attention_products(layer), *_mlp_products(layer), model.lm_head)
        if not all(isinstance(m, DecodeLinear) and m.bias is None for m in modules):
            return None
    return NativeDecodeStep(model, kernel)


def _attention_products(layer: Any) -> tuple[Any, ...]:
    attention = layer.self_attn
    return attention.q_proj, attention.k_proj, attention.v_proj, attention.o_proj


def _mlp_products(layer: Any) -> tuple[Any, ...]:
    return layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj


class DecodedStep(NamedTuple):
    """What a decoding step gives: every row's next-token logits `[rows, vocab]`, and the picks (token id and
    log-prob) of the greedy rows the step picked itself, by row."""

    logits: torch.Tensor
    picked: dict[int, tuple[int, float]]


class NativeDecodeStep:
    """Steps every row of a `BatchCache` by one token: `step(tokens, batch, adapters, greedy)`."""

    def __init__(self, model: Any, kernel: DecodeKernel) -> None:
        config = model.config
        self._model = model
        library = kernel.library
        self._step_call = library.reef_decode_step
        self._step_call.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
        ]  # fmt: skip
        self._step_call.restype = ctypes.c_int
        self._steps_call = library.reef_decode_steps
        self._steps_call.argtypes = [
            *self._step_call.argtypes[:14], ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_int,
        ]  # fmt: skip
        self._steps_call.restype = ctypes.c_int
        self._end_ids: tuple[frozenset[int] | None, Any] = (None, None)  # the last end ids given, as a ctypes array
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self._shape = _Shape(
            config.hidden_size, config.num_attention_heads, config.num_key_value_heads, head_dim,
            config.intermediate_size, float(config.rms_norm_eps),
        )  # fmt: skip
        self._scale = head_dim**-0.5
        self._layers = self._described()
        self._described_model = self._model_described()
        self._scratch: dict[str, torch.Tensor] = {}
        self._cos = self._sin = torch.empty(0, head_dim)  # per position, grown as positions need
        self._pointers = _Scratch()  # the scratch buffers' addresses
        # The cache addresses last taken, with the layout of the batch they were taken from (`BatchCache.layout`).
        self._addresses: tuple[int, Any, Any] = (-1, None, None)
        # Per adapter (by identity, held so it stays the same object): its fp32 pairs, per layer per product.
        self._pairs: dict[int, tuple[LoraAdapter, list[list[_Lora | None]], list[torch.Tensor]]] = {}

    def follow_weights(self) -> None:
        """After a swap: read the decoding copies where they now are (`DecodeLinear.refresh` made new ones)."""
        self._layers = self._described()
        self._described_model = self._model_described()

    def _model_described(self) -> _Model:
        """The layers, the embeddings, the final norm and the head as the step reads them."""
        model, head = self._model.model, self._model.lm_head
        embedding = model.embed_tokens.weight
        return _Model(
            ctypes.cast(self._layers, ctypes.POINTER(_Layer)), len(self._layers), embedding.data_ptr(),
            model.norm.weight.data_ptr(), head.decode_weight.data_ptr(), FORMATS.index(head.copy_format),
            embedding.shape[0], self._shape.eps,
        )  # fmt: skip

    def _described(self) -> ctypes.Array[_Layer]:
        layers = self._model.model.layers
        return (_Layer * len(layers))(*(self._describe(layer) for layer in layers))

    def _describe(self, layer: Any) -> _Layer:
        shape = self._shape
        products = (*_attention_products(layer), *_mlp_products(layer))
        weights = [m.decode_weight.data_ptr() for m in products]
        formats = [FORMATS.index(m.copy_format) for m in products]
        return _Layer(
            layer.input_layernorm.weight.data_ptr(), layer.post_attention_layernorm.weight.data_ptr(), *weights,
            *formats, shape.hidden, shape.heads, shape.kv_heads, shape.head_dim, shape.intermediate, shape.eps,
            self._scale,
        )  # fmt: skip

    def step(
        self, tokens: list[int], batch: BatchCache, adapters: Sequence[LoraAdapter | None],
        greedy: Sequence[bool] = (), just_before: Callable[[], None] | None = None,
    ) -> DecodedStep:  # fmt: skip
        """The next-token logits `[rows, vocab]` of every row, whose last tokens are `tokens` and whose adapters
        (None: the base alone) are `adapters`, and the picks of the rows `greedy` marks (none where the head runs in
        torch); the new keys and values go into `batch`, which the caller then advances. An adapter on the output
        head is added by its hook (the caller serves the rows' adapters). `just_before` is called just before the
        native call (the interpreter's lock is free during it). The logits the kernel makes are in a buffer the next
        step writes again (a new one each step cost the allocation and the first write's page faults, ~40 µs of a
        one-row step): whoever keeps them past the next step keeps a copy."""
        rows = len(tokens)
        head_in_torch = not self.picks_all(adapters)
        model = self._described_model
        if head_in_torch:
            model = _Model(model.layers, model.count, model.embedding, model.final_norm, None, model.head_format,
                           model.vocab, model.eps)  # fmt: skip
        picking = any(greedy) and not head_in_torch
        chosen = (ctypes.c_uint8 * rows)(*greedy) if picking else None
        picked, picked_logprobs = (ctypes.c_int64 * rows)(), (ctypes.c_float * rows)()
        arguments = self._arguments(tokens, batch, adapters, 1)
        if just_before is not None:
            just_before()
        failed = self._step_call(ctypes.byref(model), *arguments, chosen, picked, picked_logprobs, kernel_threads())
        if failed:
            self._refused(failed, tokens)
        logits, normed = self._scratch["logits"][:rows], self._scratch["final"]
        if head_in_torch:
            return DecodedStep(self._model.lm_head(normed[:rows].unsqueeze(1))[:, 0], {})
        if not picking:
            return DecodedStep(logits, {})
        return DecodedStep(logits, {r: (picked[r], picked_logprobs[r]) for r in range(rows) if greedy[r]})

    def picks_all(self, adapters: Sequence[LoraAdapter | None]) -> bool:
        """Whether the kernel makes every row's logits (no row's adapter adapts the output head), so that it can
        pick greedy rows itself and take several steps in one call (`steps`)."""
        return not any(adapter is not None and _HEAD in adapter.layers for adapter in adapters)

    def steps(
        self, tokens: list[int], batch: BatchCache, adapters: Sequence[LoraAdapter | None], count: int,
        end_ids: frozenset[int], just_before: Callable[[], None] | None = None,
    ) -> list[list[tuple[int, float]]]:  # fmt: skip
        """Up to `count` greedy steps of every row in one native call, each step's picks the next step's tokens: per
        step taken, each row's pick (token id, log-prob), the same as `step` picks them one call at a time. It stops
        after a step where a row picked one of `end_ids`. The keys and values of every step taken go into `batch`,
        which the caller then advances by the steps taken. For rows that `picks_all`, all greedy; `batch` makes
        room for the steps itself."""
        rows = len(tokens)
        if self._end_ids[0] != end_ids:
            self._end_ids = (end_ids, (ctypes.c_int64 * max(len(end_ids), 1))(*sorted(end_ids)))
        picked, picked_logprobs = (ctypes.c_int64 * (rows * count))(), (ctypes.c_float * (rows * count))()
        arguments = self._arguments(tokens, batch, adapters, count)
        if just_before is not None:
            just_before()
        taken = self._steps_call(
            ctypes.byref(self._described_model), *arguments, count, self._end_ids[1], len(end_ids), picked,
            picked_logprobs, kernel_threads(),
        )  # fmt: skip
        if taken < 1:
            self._refused(taken, tokens)
        return [[(picked[at * rows + r], picked_logprobs[at * rows + r]) for r in range(rows)] for at in range(taken)]

    def _refused(self, failed: int, tokens: list[int]) -> NoReturn:
        """Why the native call returned `failed` (-2: a token outside the vocabulary; -3: several steps without room
        or without the head; else memory ran out), as the error to raise."""
        if failed == -2:
            raise ValueError(f"decoding: a token id outside the vocabulary of {self._described_model.vocab}: {tokens}")
        if failed == -3:
            raise ValueError("decoding: several steps need room in the cache and the head in the kernel")
        raise MemoryError("decoding: no memory for the attention scores, an adapter's delta or the head's inputs")

    def _arguments(
        self, tokens: list[int], batch: BatchCache, adapters: Sequence[LoraAdapter | None], ahead: int
    ) -> tuple[Any, ...]:
        """What the step's native call takes after the model, up to the logits: the rows' tokens, the buffers, the
        cache with room for `ahead` more positions a row, the rotary tables and the adapters' pairs."""
        rows = len(tokens)
        if batch.values_dtype != torch.float16:
            raise ValueError("decoding: the native step reads a cache of fp16 values (BatchCache(torch.float16))")
        positions = (ctypes.c_int64 * rows)(*batch.next_positions(ahead))
        room = self._room(rows)
        hidden = self._scratch["hidden"]
        cos, sin = self._rotary(hidden, batch.capacity)
        keys, values = self._cache_addresses(batch)
        token_ids, lora = (ctypes.c_int64 * rows)(*tokens), self._lora_rows(adapters)
        return (
            token_ids, rows, hidden.data_ptr(), cos.data_ptr(), sin.data_ptr(), keys, values, positions,
            batch.capacity, ctypes.byref(room), lora, self._scratch["final"].data_ptr(),
            self._scratch["logits"].data_ptr(),
        )  # fmt: skip

    def _rotary(self, hidden: torch.Tensor, capacity: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The rotary cos and sin tables `[positions, head_dim]`, made anew, larger, when `capacity` (which covers
        every position of this step) is past their end; the kernel takes each row's at its position."""
        if capacity > self._cos.shape[0]:
            every = torch.arange(-(-capacity // ROTARY_ROWS) * ROTARY_ROWS).unsqueeze(0)
            self._cos, self._sin = (t[0].contiguous() for t in self._model.model.rotary_emb(hidden, every))
        return self._cos, self._sin

    def _cache_addresses(self, batch: BatchCache) -> tuple[ctypes.Array[ctypes.c_void_p], ...]:
        """Per layer, the addresses of the batch's keys and of its values, made anew only when its buffers were
        replaced (a step's ctypes arrays of 2 x 30 addresses took 0.05 ms, run cold after the weights)."""
        if self._addresses[0] != batch.layout:
            count = len(self._layers)
            keys = (ctypes.c_void_p * count)(*(cache.data_ptr() for cache in batch.keys))
            values = (ctypes.c_void_p * count)(*(cache.data_ptr() for cache in batch.values))
            self._addresses = (batch.layout, keys, values)
        return self._addresses[1], self._addresses[2]

    def _lora_rows(self, adapters: Sequence[LoraAdapter | None]) -> ctypes.Array[Any] | None:
        """Per layer, the array the kernel reads: per product, per row, the row's adapter's pair or NULL; None when
        no row has an adapter."""
        if all(adapter is None for adapter in adapters):
            return None
        per_adapter = [None if adapter is None else self._pairs_of(adapter) for adapter in adapters]
        rows = len(adapters)
        layers = (_LAYER_LORA * len(self._layers))()  # holds each layer's array (ctypes keeps what is cast in)
        for layer in range(len(self._layers)):
            array = (_LORA_ROWS * (len(_MODULE_PATHS) * rows))()
            for row, pairs in enumerate(per_adapter):
                if pairs is None:
                    continue
                for product, pair in enumerate(pairs[layer]):
                    if pair is not None:
                        array[product * rows + row] = ctypes.pointer(pair)
            layers[layer] = ctypes.cast(array, _LAYER_LORA)
        return layers

    def _pairs_of(self, adapter: LoraAdapter) -> list[list[_Lora | None]]:
        """The adapter's pairs per layer and product, made once per adapter (A and B as contiguous fp32)."""
        kept = self._pairs.get(id(adapter))
        if kept is not None and kept[0] is adapter:
            return kept[1]
        if len(self._pairs) >= ADAPTERS_KEPT:
            self._pairs.clear()
        tensors: list[torch.Tensor] = []
        layers: list[list[_Lora | None]] = []
        for index in range(len(self._layers)):
            products: list[_Lora | None] = []
            for path in _MODULE_PATHS:
                found = adapter.layers.get(f"model.layers.{index}.{path}")
                if found is None:
                    products.append(None)
                    continue
                a, b = (t.detach().to(torch.float32).contiguous() for t in found)
                tensors += [a, b]
                products.append(_Lora(a.data_ptr(), b.data_ptr(), a.shape[0], adapter.scale))
            layers.append(products)
        self._pairs[id(adapter)] = (adapter, layers, tensors)
        return layers

    def _room(self, rows: int) -> _Scratch:
        """Scratch buffers for `rows` rows, kept between steps (grown when the batch grows), as the layer call reads
        them; besides them, each row's residual stream (`hidden`), its final norm (`final`) and its logits."""
        if not self._scratch or self._scratch["normed"].shape[0] < rows:
            own = {"hidden": self._shape.hidden, "final": self._shape.hidden, "logits": self._described_model.vocab}
            widths = {**self._shape.widths(), **own}
            self._scratch = {name: torch.empty(rows, width) for name, width in widths.items()}
            self._pointers = _Scratch(*(self._scratch[name].data_ptr() for name in _SCRATCH))
        return self._pointers
