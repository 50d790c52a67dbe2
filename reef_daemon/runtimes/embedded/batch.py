"""The keys and values of every sequence being decoded, one row each, so one forward pass steps them all.

Row `r` holds its sequence's positions `0 .. lengths[r] - 1`; rows have room for a common capacity of positions,
and what lies past a row's own positions (what an earlier row left there) is never read: the native step and
`row_attention` attend each row over exactly its positions. The model writes each row's new key and value at that
row's own position (`update`, called by every attention layer). Rows join from a finished prompt read (a per-sequence
`DynamicCache`) and leave when their sequence ends: a joining row is copied into a free row of the buffers, a
leaving one's place closed up in place, and a decoding step copies nothing.

Keys are kept in fp32, values in fp16 for the native step (`decode_step.py`): a decoding step reads every cached
position of its rows (SmolLM2: 35 KB a position, 46 KB with fp32 values), and attention is a fifth of a four-row
step. Values rounded to fp16 left the decoding copies' log-prob error where it was
(`tests/embedded/test_decode_precision.py`: 0.0020 nats at worst against 0.0023), where fp16 keys doubled it.
Decoding through transformers' forward pass keeps them in fp32 (`values`), as the weights it reads.

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
ROW_ROOM = 4  # rows the buffers have room for, at least
KEPT_BYTES = 64 << 20  # the most buffer an emptied batch keeps for the next requests (SmolLM2: 4 rows, 460 positions)
_LAYOUTS = itertools.count()


class BatchCache:
    """Per-layer key (fp32) and value (fp16, or `values`) buffers `[rows, kv_heads, capacity, head_dim]` and each
    row's length.

    The buffers are the first rows of larger ones with room for more rows (at least ROW_ROOM): a row that joins is
    copied into the next free one, and a row that leaves is closed up in place, so neither makes new buffers. On a VM
    whose host backs memory on first touch, fresh buffers took 11 ms to join one row of ~300 positions and 43 ms to
    join three, where copying a row takes ~1 ms.
    """

    def __init__(self, values: torch.dtype = torch.float16) -> None:
        self.values_dtype = values  # the values' dtype (keys: fp32)
        self._key_rooms: list[torch.Tensor] = []  # per layer [room, kv_heads, capacity, head_dim]
        self._value_rooms: list[torch.Tensor] = []
        self.keys: list[torch.Tensor] = []  # per layer, the rooms' first len(self) rows
        self.values: list[torch.Tensor] = []
        self.lengths: list[int] = []
        # Names the buffers as they are: a new number, unique in the process, each time they change shape or place
        # (rows joined or left, room was made).
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
        """Append a row for each single-sequence `DynamicCache`, in order, into the buffers' free rows (made anew,
        larger, only when there are too few or a row is too long)."""
        if not caches:
            return
        rows = [[(layer.keys, layer.values) for layer in cache.layers] for cache in caches]
        lengths = [int(layers[0][0].shape[2]) for layers in rows]
        count, longest = len(self.lengths) + len(rows), max([*self.lengths, *lengths]) + 1
        rooms = self._key_rooms
        if not rooms:
            self._make_room(rows[0][0][0], len(rows[0]), count, longest + GROWTH)
        elif count > rooms[0].shape[0] or longest > self.capacity:
            capacity = longest + GROWTH if longest > self.capacity else self.capacity
            self._make_room(rooms[0], len(rooms), max(count, 2 * rooms[0].shape[0]), capacity)
        first = len(self.lengths)
        for index, (key_room, value_room) in enumerate(zip(self._key_rooms, self._value_rooms, strict=True)):
            for offset, (layers, length) in enumerate(zip(rows, lengths, strict=True)):
                keys, values = layers[index]
                key_room[first + offset, :, :length].copy_(keys[0])
                value_room[first + offset, :, :length].copy_(values[0])
        self.lengths.extend(lengths)
        self._show_rows()

    def remove(self, rows: list[int]) -> None:
        """Drop these rows (their sequences ended): the rows after them move up, in order. An emptied batch keeps
        buffers of up to KEPT_BYTES for the next requests."""
        if not rows:
            return
        gone = set(rows)
        keep = [row for row in range(len(self.lengths)) if row not in gone]
        for room in (*self._key_rooms, *self._value_rooms):
            for to, row in enumerate(keep):
                if to != row:
                    room[to].copy_(room[row])
        self.lengths = [self.lengths[row] for row in keep]
        held = sum(room.nbytes for room in (*self._key_rooms, *self._value_rooms))
        if not self.lengths and held > KEPT_BYTES:
            self._key_rooms, self._value_rooms = [], []
        self._show_rows()

    @property
    def capacity(self) -> int:
        return int(self._key_rooms[0].shape[2]) if self._key_rooms else 0

    def next_positions(self, ahead: int = 1) -> list[int]:
        """The position of the next token of each row, where `update` (or the native step, `decode_step.py`)
        writes its key and value; room is made for it and the `ahead` - 1 after it."""
        self._span = max(self.lengths) + 1
        self._reserve(self._span + ahead - 1)
        return list(self.lengths)

    def step_inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Position ids `[rows, 1]` of the next token of each row, and the boolean attention mask
        `[rows, 1, 1, span]` that lets each row see its own positions up to that token."""
        self._positions = torch.tensor(self.next_positions(), dtype=torch.long)
        self._rows = torch.arange(len(self.lengths))
        mask = torch.arange(self._span).unsqueeze(0) <= self._positions.unsqueeze(1)
        return self._positions.unsqueeze(1), mask[:, None, None, :]

    def advance(self, steps: int = 1) -> None:
        """After `steps` steps: every row holds that many more positions."""
        self.lengths = [length + steps for length in self.lengths]

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, **_: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Called by the attention layers during the step `step_inputs` prepared: write one new position per row,
        return every row's keys and values."""
        keys, values = self.keys[layer_idx], self.values[layer_idx]
        keys[self._rows, :, self._positions, :] = key_states[:, :, 0, :].to(keys.dtype)
        values[self._rows, :, self._positions, :] = value_states[:, :, 0, :].to(values.dtype)
        return keys[:, :, : self._span], values[:, :, : self._span].to(keys.dtype)

    def _reserve(self, positions: int) -> None:
        if positions > self.capacity:
            rooms = self._key_rooms
            self._make_room(rooms[0], len(rooms), rooms[0].shape[0], positions + GROWTH)

    def _make_room(self, like: torch.Tensor, layers: int, rows: int, capacity: int) -> None:
        """New buffers for `layers` layers of `rows` rows (at least ROW_ROOM) and `capacity` positions (no fewer
        than now), shaped as `like` in heads and head size, holding the rows so far. Rows not yet used are left
        unwritten: memory untouched until a row joins there."""
        shape = (max(rows, ROW_ROOM), like.shape[1], capacity, like.shape[3])
        count = len(self.lengths)
        made: list[list[torch.Tensor]] = []
        for old_rooms, dtype in ((self._key_rooms, torch.float32), (self._value_rooms, self.values_dtype)):
            rooms = []
            for layer in range(layers):
                room = like.new_empty(shape, dtype=dtype)
                if old_rooms:
                    old = old_rooms[layer]
                    room[:count, :, : old.shape[2]].copy_(old[:count])
                rooms.append(room)
            made.append(rooms)
        self._key_rooms, self._value_rooms = made
        self._show_rows()

    def _show_rows(self) -> None:
        """`keys` and `values`: the rooms' rows in use, under a new layout number."""
        self.keys = [room[: len(self.lengths)] for room in self._key_rooms]
        self.values = [room[: len(self.lengths)] for room in self._value_rooms]
        self.layout = next(_LAYOUTS)


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
