"""One decoding step of a Llama-shaped model, written out: the same modules and the same arithmetic as the model's
own forward pass, without what that pass does for every use a model can be put to.

A decoding step gives each row of the batch one token. Through `model(...)` that is, per layer, a dozen Python calls
of keyword plumbing, mask building, output records and dispatch around the same few products; on a two-core CPU that
plumbing costs about as much as the products themselves. Here the step calls the model's own submodules (so the
decode copies, the LoRA hooks and the weights a swap changed are all in play) in the order the model's forward calls
them. Attention is each row's own, over exactly its positions, in three products (`attend`): a row's logits are the
same bits alone or beside any others, and those of `model(...)` to rounding.

`supports(model)` says whether a model has the shape written out here (Llama and its kin: SmolLM2, Qwen2 without
sliding windows); the worker falls back to `model(...)` for any other.
"""

from __future__ import annotations

from typing import Any

import torch

from reef_daemon.runtimes.embedded.batch import BatchCache

_SHAPES = ("LlamaForCausalLM",)


def supports(model: Any) -> bool:
    """Whether `decode_step` computes what `model(...)` does for this model."""
    config = model.config
    return (
        type(model).__name__ in _SHAPES
        and not getattr(config, "attention_bias", False)
        and not getattr(config, "mlp_bias", False)
        and getattr(config, "pretraining_tp", 1) == 1
    )


def attend(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, scaling: float) -> torch.Tensor:
    """One row's attention for its one new position: `query` [heads, 1, dim] over its own `keys` and `values`
    [kv_heads, span, dim], the query heads grouped over the key-value heads they share; [heads * dim]."""
    kv_heads, _span, dim = keys.shape
    grouped = query.view(kv_heads, -1, dim)  # [kv_heads, heads per kv head, dim]
    weights = torch.softmax(torch.bmm(grouped, keys.transpose(1, 2)) * scaling, dim=-1)
    return torch.bmm(weights, values).view(-1)


def decode_step(model: Any, tokens: list[int], cache: BatchCache) -> torch.Tensor:
    """The next-token logits `[rows, vocab]` of each row, whose last token is `tokens[row]`; the new keys and
    values are written into `cache` (its `step_inputs` and `advance` are the caller's, as around `model(...)`)."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    inner = model.model
    rows = len(tokens)
    positions = torch.tensor(cache.lengths, dtype=torch.long).unsqueeze(1)
    hidden = inner.embed_tokens(torch.tensor(tokens).unsqueeze(1))  # [rows, 1, hidden]
    cos, sin = inner.rotary_emb(hidden, position_ids=positions)
    spans = [length + 1 for length in cache.lengths]
    for index, layer in enumerate(inner.layers):
        attention = layer.self_attn
        head_dim = attention.head_dim
        normed = layer.input_layernorm(hidden)
        query = attention.q_proj(normed).view(rows, 1, -1, head_dim).transpose(1, 2)
        key = attention.k_proj(normed).view(rows, 1, -1, head_dim).transpose(1, 2)
        value = attention.v_proj(normed).view(rows, 1, -1, head_dim).transpose(1, 2)
        query, key = apply_rotary_pos_emb(query, key, cos, sin)
        keys, values = cache.update(key, value, index)
        attended = torch.stack(
            [
                attend(query[r], keys[r, :, :span], values[r, :, :span], attention.scaling)
                for r, span in enumerate(spans)
            ]
        )
        hidden = hidden + attention.o_proj(attended.view(rows, 1, -1))
        hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
    logits: torch.Tensor = model.lm_head(inner.norm(hidden))[:, -1]
    return logits
