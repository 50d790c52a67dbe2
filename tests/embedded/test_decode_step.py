"""The decoding step written out gives every row the logits the model's own forward pass gives it, to rounding, over
rows of different lengths, several steps in a row and rows on different LoRA adapters; a row gets the same bits alone
as beside others; and a model of another shape is left to its own forward pass. A small Llama with random weights
stands in for SmolLM2 (same code, other sizes)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from reef_daemon.runtimes.embedded.adapters import PEFT_PREFIX, AdapterBank, LoraAdapter, lora_layers
from reef_daemon.runtimes.embedded.batch import BatchCache, use_row_attention
from reef_daemon.runtimes.embedded.decode_step import decode_step, supports
from reef_daemon.runtimes.embedded.precision import add_decode_copies

PROMPTS = [[5, 9, 11], [7, 3, 2, 8, 8, 1, 4], [12]]


@pytest.fixture
def model() -> Any:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=True,
    )  # fmt: skip
    llama = LlamaForCausalLM(config).eval()
    add_decode_copies(llama)
    use_row_attention(llama)
    return llama


def batch_of(model: Any, prompts: list[list[int]], serve: Any) -> tuple[BatchCache, list[int]]:
    """A batch holding each prompt's keys and values, and each prompt's greedy next token; `serve(rows)` says which
    rows of the batch a forward pass reads."""
    batch, tokens = BatchCache(), []
    for row, prompt in enumerate(prompts):
        cache = DynamicCache(config=model.config)
        with serve([row]):
            out = model(input_ids=torch.tensor([prompt]), cache=cache, use_cache=True, logits_to_keep=1)
        batch.add(cache)
        tokens.append(int(out.logits[0, -1].argmax()))
    return batch, tokens


def through_model(model: Any, batch: BatchCache, tokens: list[int]) -> torch.Tensor:
    positions, mask = batch.step_inputs()
    out = model(
        input_ids=torch.tensor([[token] for token in tokens]), position_ids=positions, attention_mask=mask,
        cache=batch, use_cache=True, logits_to_keep=1,
    )  # fmt: skip
    batch.advance()
    logits: torch.Tensor = out.logits[:, -1]
    return logits


def written_out(model: Any, batch: BatchCache, tokens: list[int]) -> torch.Tensor:
    batch.step_inputs()
    logits = decode_step(model, tokens, batch)
    batch.advance()
    return logits


def steps(
    model: Any, step: Any, count: int, serve: Any = None, prompts: list[list[int]] = PROMPTS
) -> list[torch.Tensor]:
    """`count` greedy steps of the prompts together; each step's logits."""
    serve = serve or (lambda rows: contextlib.nullcontext())
    batch, tokens = batch_of(model, prompts, serve)
    seen = []
    for _ in range(count):
        with serve(list(range(len(prompts)))):
            logits = step(model, batch, tokens)
        seen.append(logits)
        tokens = [int(row.argmax()) for row in logits]
    return seen


def lora(seed: int, model: Any) -> LoraAdapter:
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name, module in model.named_modules():
        if name.endswith(("q_proj", "v_proj")):
            state[f"{PEFT_PREFIX}{name}.lora_A.weight"] = torch.randn(2, module.weight.shape[1], generator=generator)
            state[f"{PEFT_PREFIX}{name}.lora_B.weight"] = torch.randn(module.weight.shape[0], 2, generator=generator)
    return LoraAdapter(f"scenario-{seed}", f"v{seed}", 0.5, lora_layers(state))


@torch.inference_mode()
def test_each_row_gets_the_logits_of_the_models_own_forward_pass(model: Any) -> None:
    assert supports(model)
    ours, theirs = steps(model, written_out, 4), steps(model, through_model, 4)
    for mine, reference in zip(ours, theirs, strict=True):
        torch.testing.assert_close(mine, reference, rtol=0, atol=1e-5)
        assert torch.equal(mine.argmax(-1), reference.argmax(-1))


@torch.inference_mode()
def test_a_row_gets_the_same_bits_alone_as_beside_others(model: Any) -> None:
    together = steps(model, written_out, 4)
    for row, prompt in enumerate(PROMPTS):
        alone = steps(model, written_out, 4, prompts=[prompt])
        for step, logits in enumerate(alone):
            assert torch.equal(logits[0], together[step][row]), (row, step)


@torch.inference_mode()
def test_rows_on_different_adapters_get_the_logits_of_the_models_own_forward_pass(model: Any, tmp_path: Path) -> None:
    bank = AdapterBank(model, 4, tmp_path / "spilled")
    one, two = lora(1, model), lora(2, model)
    bank.install(one)
    bank.install(two)
    adapters = [bank.get(one.scenario), None, bank.get(two.scenario)]

    def serve(rows: list[int]) -> Any:
        return bank.serving([adapters[row] for row in rows])

    ours, theirs = steps(model, written_out, 3, serve), steps(model, through_model, 3, serve)
    plain = steps(model, written_out, 1)
    for mine, reference in zip(ours, theirs, strict=True):
        torch.testing.assert_close(mine, reference, rtol=0, atol=1e-5)
    assert not torch.equal(ours[0][0], plain[0][0])  # the adapters are in play
    assert torch.equal(ours[0][1], plain[0][1])  # and only on their own rows


def test_a_model_of_another_shape_keeps_its_own_forward_pass() -> None:
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=32, n_embd=16, n_layer=1, n_head=2, n_positions=32))
    assert not supports(gpt2)
