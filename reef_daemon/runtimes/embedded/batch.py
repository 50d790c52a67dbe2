"""The keys and values of every sequence being decoded, one row each, so one forward pass steps them all.

Row `r` holds its sequence's positions `0 .. lengths[r] - 1`; rows are padded to a common capacity, and the
attention mask marks each row's own positions. The model writes each row's new key and value at that row's own
position (`update`, called by every attention layer). Rows join from a finished prompt read (a per-sequence
`DynamicCache`) and leave when their sequence ends; both copy the buffers once, while a decoding step copies nothing.

A sequence's tokens must not depend on which others share its steps. The decoding products give each row the same
result whatever the number of rows, but attention over a padded span rounds differently from attention over the
row's own span; `row_attention` therefore attends row by row over exactly each row's positions, as a sequence
decoded alone does.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import torch

ROW_ATTENTION = "reef_rows"
GROWTH = 256  # positions added to every row when the longest one runs out of room
_LAYOUTS = itertools.count()


class BatchCache:
    """Per-layer key/value buffers `[rows, kv_heads, capacity, head_dim]` and each row's length."""

    def __init__(self) -> None:
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.lengths: list[int] = []
        # Names the buffers as they are: a new number, unique in the process, each time they are replaced (rows
        # joined or left, room was made).
        self.layout = next(_LAYOUTS)
        # The step's row indices, write positions and attended span, made once per step by `step_inputs`.
        self._rows = torch.zeros(0, dtype=torch.long)
        self._positions = torch.zeros(0, dtype=torch.long)
        self._span = 0

    def __len__(self) -> int:
        return len(self.lengths)

    def add(self, cache: Any) -> None:
        """Append a row holding the contents of a single-sequence `DynamicCache`."""
        self.extend([cache])

    def extend(self, caches: Sequence[Any]) -> None:
        """Append a row for each single-sequence `DynamicCache`, in order: the batch's buffers are copied once
        for all of them (requests that arrive together join together)."""
        if not caches:
            return
        rows = [[(layer.keys, layer.values) for layer in cache.layers] for cache in caches]
        lengths = [int(layers[0][0].shape[2]) for layers in rows]
        if not self.lengths:
            self.keys = [_empty_like(k, 0, max(lengths) + GROWTH) for k, _ in rows[0]]
            self.values = [_empty_like(v, 0, max(lengths) + GROWTH) for _, v in rows[0]]
        self._reserve(max(lengths) + 1)
        for index in range(len(self.keys)):
            self.keys[index] = torch.cat([self.keys[index], *(_padded(r[index][0], self.capacity) for r in rows)])
            self.values[index] = torch.cat([self.values[index], *(_padded(r[index][1], self.capacity) for r in rows)])
        self.lengths.extend(lengths)
        self.layout = next(_LAYOUTS)

    def remove(self, rows: list[int]) -> None:
        """Drop these rows (their sequences ended)."""
        if not rows:
            return
        keep = [row for row in range(len(self.lengths)) if row not in set(rows)]
        index = torch.tensor(keep, dtype=torch.long)
        self.keys = [k.index_select(0, index) for k in self.keys]
        self.values = [v.index_select(0, index) for v in self.values]
        self.lengths = [self.lengths[row] for row in keep]
        self.layout = next(_LAYOUTS)

    @property
    def capacity(self) -> int:
        return int(self.keys[0].shape[2]) if self.keys else 0

    def next_positions(self) -> list[int]:
        """The position of the next token of each row, where `update` (or the native step, `decode_step.py`)
        writes its key and value; room is made for it."""
        self._span = max(self.lengths) + 1
        self._reserve(self._span)
        return list(self.lengths)

    def step_inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Position ids `[rows, 1]` of the next token of each row, and the boolean attention mask
        `[rows, 1, 1, span]` that lets each row see its own positions up to that token."""
        self._positions = torch.tensor(self.next_positions(), dtype=torch.long)
        self._rows = torch.arange(len(self.lengths))
        mask = torch.arange(self._span).unsqueeze(0) <= self._positions.unsqueeze(1)
        return self._positions.unsqueeze(1), mask[:, None, None, :]

    def advance(self) -> None:
        """After a step: every row holds one more position."""
        self.lengths = [length + 1 for length in self.lengths]

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, **_: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Called by the attention layers during the step `step_inputs` prepared: write one new position per row,
        return every row's keys and values."""
        keys, values = self.keys[layer_idx], self.values[layer_idx]
        keys[self._rows, :, self._positions, :] = key_states[:, :, 0, :].to(keys.dtype)
        values[self._rows, :, self._positions, :] = value_states[:, :, 0, :].to(values.dtype)
        return keys[:, :, : self._span], values[:, :, : self._span]

    def _reserve(self, positions: int) -> None:
        if positions <= self.capacity:
            return
        capacity = positions + GROWTH
        self.keys = [_padded(k, capacity) for k in self.keys]
        self.values = [_padded(v, capacity) for v in self.values]
        self.layout = next(_LAYOUTS)


def _empty_like(tensor: torch.Tensor, rows: int, capacity: int) -> torch.Tensor:
    return tensor.new_zeros((rows, tensor.shape[1], capacity, tensor.shape[3]))


def _padded(tensor: torch.Tensor, capacity: int) -> torch.Tensor:
    """`tensor` `[rows, heads, length, dim]` with zeros after its positions, up to `capacity`."""
    extra = capacity - tensor.shape[2]
    if extra <= 0:
        return tensor
    return torch.cat([tensor, tensor.new_zeros((*tensor.shape[:2], extra, tensor.shape[3]))], dim=2)


def use_row_attention(model: Any) -> None:
    """Make the model attend with `row_attention` (masks for prompt reading are made as for sdpa)."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(ROW_ATTENTION, row_attention)
    AttentionMaskInterface.register(ROW_ATTENTION, sdpa_mask)
    model.set_attn_implementation(ROW_ATTENTION)


def row_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, Any]:
    """sdpa attention; for one new position per row under a boolean mask of each row's leading positions (a
    decoding step), row by row over exactly that row's keys and values."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if attention_mask is None or attention_mask.dtype != torch.bool or query.shape[2] != 1:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    spans = attention_mask[:, 0, 0, :].sum(dim=-1).tolist()
    rows = [
        sdpa_attention_forward(
            module, query[r : r + 1], key[r : r + 1, :, :span], value[r : r + 1, :, :span], None, **kwargs
        )[0]
        for r, span in enumerate(spans)
    ]
    return torch.cat(rows), None
