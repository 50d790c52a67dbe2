"""The native decoding step: the logits of transformers' forward pass, a row's bits the same alone or in any batch,
and LoRA adapters served per row inside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from reef_daemon.runtimes.embedded.adapters import AdapterBank, LoraAdapter
from reef_daemon.runtimes.embedded.batch import BatchCache, use_row_attention
from reef_daemon.runtimes.embedded.decode_kernel import decoding_method, load_kernel
from reef_daemon.runtimes.embedded.decode_step import ROTARY_ROWS, NativeDecodeStep, native_step
from reef_daemon.runtimes.embedded.precision import (
    DecodeLinear,
    DecodeWeights,
    add_decode_copies,
    decode_copies,
    refresh_decode_copies,
)
from reef_daemon.runtimes.embedded.versions import copy_weights
from tests.support.gguf_grid import on_a_gguf_grid

PROMPTS = [[3, 14, 15, 9, 2, 6], [5, 35], [8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4]]


def tiny_llama(weights: DecodeWeights = "fp16") -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=80, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=True, rope_theta=10000.0,
    )  # fmt: skip
    made = LlamaForCausalLM(config).eval()
    add_decode_copies(made, weights)
    use_row_attention(made)
    return made


@pytest.fixture(scope="module")
def model() -> Any:
    return tiny_llama()


@pytest.fixture(scope="module")
def step(model: Any) -> NativeDecodeStep:
    made = native_step(model, load_kernel())
    assert made is not None, decoding_method("fp16 weights")
    return made


def read(model: Any, prompts: list[list[int]]) -> BatchCache:
    batch = BatchCache()
    for prompt in prompts:
        batch.add(read_one(model, prompt))
    return batch


def read_one(model: Any, prompt: list[int]) -> Any:
    """The prompt's single-sequence `DynamicCache`."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        model(input_ids=torch.tensor([prompt]), cache=cache, use_cache=True)
    return cache


def transformers_step(model: Any, tokens: list[int], batch: BatchCache) -> torch.Tensor:
    positions, mask = batch.step_inputs()
    out = model(
        input_ids=torch.tensor([[t] for t in tokens]), position_ids=positions, attention_mask=mask, cache=batch,
        use_cache=True, logits_to_keep=1,
    )  # fmt: skip
    batch.advance()
    return out.logits[:, -1]


def native(
    step: NativeDecodeStep, tokens: list[int], batch: BatchCache, adapters: list[LoraAdapter | None] | None = None
) -> torch.Tensor:
    logits = step.step(tokens, batch, adapters or [None] * len(tokens)).logits.clone()  # the next step reuses them
    batch.advance()
    return logits


def steps_match_transformers(
    model: Any, step: NativeDecodeStep, steps: int, prompts: list[list[int]] = PROMPTS
) -> tuple[BatchCache, BatchCache]:
    """Decode `prompts` greedily for `steps` steps natively and through transformers' forward pass, asserting the
    same logits at each; the two caches."""
    ours, theirs = read(model, prompts), read(model, prompts)
    tokens = [p[-1] for p in prompts]
    with torch.inference_mode():
        for _ in range(steps):
            got, expected = native(step, tokens, ours), transformers_step(model, tokens, theirs)
            assert torch.allclose(got, expected, rtol=1e-4, atol=1e-4), (got - expected).abs().max()
            tokens = expected.argmax(-1).tolist()
    return ours, theirs


def test_steps_give_the_logits_of_transformers_forward_pass(model: Any, step: NativeDecodeStep) -> None:
    ours, theirs = steps_match_transformers(model, step, 6)
    for layer in range(model.config.num_hidden_layers):  # the same keys and values were written
        for row, length in enumerate(ours.lengths):
            assert torch.allclose(ours.keys[layer][row, :, :length], theirs.keys[layer][row, :, :length], atol=1e-4)
            ours_values, their_values = ours.values[layer][row, :, :length], theirs.values[layer][row, :, :length]
            assert torch.allclose(ours_values.float(), their_values.float(), rtol=2**-10, atol=1e-4)  # fp16: an ulp


def test_rows_decoding_past_the_rotary_table_get_transformers_logits(model: Any, step: NativeDecodeStep) -> None:
    """The rotary angles come from a table of positions, made anew and larger when a row passes its end."""
    steps_match_transformers(model, step, 1)  # short rows: a table of ROTARY_ROWS positions at most
    long = [3 + i % 70 for i in range(ROTARY_ROWS - 2)]
    steps_match_transformers(model, step, 5, [long, [5, 35]])


def test_rows_that_join_together_step_as_rows_that_joined_one_by_one(model: Any, step: NativeDecodeStep) -> None:
    """Requests that arrive together join the batch in one copy of its buffers (`BatchCache.extend`): the same rows,
    positions, keys and logits as joining one at a time."""
    one_by_one = read(model, PROMPTS[:1])
    caches = [read_one(model, prompt) for prompt in PROMPTS[1:]]
    with torch.inference_mode():
        together = read(model, PROMPTS[:1])
        for cache in caches:
            one_by_one.add(cache)
        together.extend(caches)
        assert together.lengths == one_by_one.lengths == [len(p) for p in PROMPTS]
        tokens = [p[-1] for p in PROMPTS]
        assert torch.equal(native(step, tokens, together), native(step, tokens, one_by_one))
    for ours, theirs in zip(together.keys, one_by_one.keys, strict=True):  # each row's own positions
        for row, length in enumerate(together.lengths):
            assert torch.equal(ours[row, :, :length], theirs[row, :, :length])


def test_int8_copies_step_as_transformers_does_with_them() -> None:
    """The native step reads the int8 copies and their scales where the layer modules hold them."""
    int8 = tiny_llama("int8")
    step = native_step(int8, load_kernel())
    assert step is not None
    ours, theirs = read(int8, PROMPTS), read(int8, PROMPTS)
    tokens = [p[-1] for p in PROMPTS]
    with torch.inference_mode():
        got, expected = native(step, tokens, ours), transformers_step(int8, tokens, theirs)
        fp16 = native(native_step(tiny_llama(), load_kernel()), tokens, read(tiny_llama(), PROMPTS))
    assert torch.allclose(got, expected, rtol=1e-4, atol=1e-4)
    assert not torch.equal(got, fp16)  # the int8 copies are what decoded


def test_after_a_swap_the_step_reads_the_new_copies_of_either_kind() -> None:
    """`auto` copies are 4-bit while the weights are on a GGUF's Q4_1 grid; a swap that moves one off it makes a new
    fp16 copy elsewhere, which the step reads from then on (`follow_weights`), as transformers' forward pass does."""
    model = tiny_llama("auto")
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, DecodeLinear):
                module.weight.copy_(on_a_gguf_grid(*module.weight.shape, "q4_1", generator))
                module.refresh()
    assert decode_copies(model) == "int4 weights"
    step = native_step(model, load_kernel())
    assert step is not None
    steps_match_transformers(model, step, 2)  # the 4-bit copies, as transformers' forward pass reads them
    name = "model.layers.1.mlp.down_proj.weight"
    moved = {name: model.get_parameter(name).detach() + torch.randn(64, 96, generator=generator) * 1e-3}
    with torch.no_grad():
        copy_weights(model, moved)
    refresh_decode_copies(model, moved.keys())
    step.follow_weights()
    assert decode_copies(model) == "int4 for 21 of 22 weights, fp16 for the rest"
    steps_match_transformers(model, step, 3)


def test_a_row_gets_the_same_bits_alone_or_in_a_batch(model: Any, step: NativeDecodeStep) -> None:
    with torch.inference_mode():
        alone = [native(step, [p[-1]], read(model, [p])) for p in PROMPTS]
        together = native(step, [p[-1] for p in PROMPTS], read(model, PROMPTS))
    for row, logits in enumerate(alone):
        assert torch.equal(together[row], logits[0]), f"row {row}"


def test_rows_that_leave_and_join_in_place_step_as_they_would_alone(model: Any, step: NativeDecodeStep) -> None:
    """A leaving row's place is closed up and a joining row takes a free one, in the same buffers: every row still
    gets the bits it would get alone."""
    with torch.inference_mode():
        batch = read(model, PROMPTS[:2])
        native(step, [PROMPTS[0][-1], PROMPTS[1][-1]], batch)
        buffer = batch.keys[0].data_ptr()
        batch.remove([0])
        batch.extend([read_one(model, PROMPTS[2])])
        together = native(step, [7, PROMPTS[2][-1]], batch)
        first = read(model, PROMPTS[1:2])
        native(step, [PROMPTS[1][-1]], first)
        alone = [native(step, [7], first)[0], native(step, [PROMPTS[2][-1]], read(model, PROMPTS[2:]))[0]]
    assert batch.keys[0].data_ptr() == buffer  # no new buffers
    assert torch.equal(together[0], alone[0]) and torch.equal(together[1], alone[1])


@pytest.mark.parametrize("greedy", [[True, True, True], [False, True, False]])
def test_the_step_picks_its_greedy_rows_as_the_kernels_pick_greedy_does(
    model: Any, step: NativeDecodeStep, greedy: list[bool]
) -> None:
    """Greedy rows are picked inside the step's call: the token and log-prob `pick_greedy` takes from the step's
    logits, bit for bit; the other rows are left to the sampler."""
    with torch.inference_mode():
        decoded = step.step([p[-1] for p in PROMPTS], read(model, PROMPTS), [None] * len(PROMPTS), greedy)
    expected = load_kernel().pick_greedy(decoded.logits)
    assert decoded.picked == {row: expected[row] for row, chosen in enumerate(greedy) if chosen}


def test_an_adapted_row_gets_its_delta_and_the_others_the_same_bits(
    model: Any, step: NativeDecodeStep, tmp_path: Path
) -> None:
    generator = torch.Generator().manual_seed(2)
    layers = {
        f"model.layers.{index}.{path}": (torch.randn(4, inputs, generator=generator) * 0.1,
                                         torch.randn(outputs, 4, generator=generator) * 0.1)
        for index in range(3)
        for path, inputs, outputs in (("self_attn.q_proj", 64, 64), ("mlp.down_proj", 96, 64))
    }  # fmt: skip
    vocab, hidden = model.lm_head.weight.shape  # the head too: its delta is added in torch, by the module's hook
    layers["lm_head"] = (torch.randn(4, hidden, generator=generator) * 0.1,
                         torch.randn(vocab, 4, generator=generator) * 0.1)  # fmt: skip
    bank = AdapterBank(model, capacity=2, spill_dir=tmp_path)
    bank.install(LoraAdapter("tuned", "v1", 2.0, layers))
    adapter = bank.get("tuned")
    tokens = [p[-1] for p in PROMPTS]
    ours, theirs = read(model, PROMPTS), read(model, PROMPTS)  # the prompts read without the adapter
    with torch.inference_mode():
        plain = native(step, tokens, read(model, PROMPTS))
        with bank.serving([None, adapter, None]):
            decoded = step.step(tokens, ours, [None, adapter, None], greedy=[True] * 3)
            expected = transformers_step(model, tokens, theirs)
    adapted = decoded.logits
    assert decoded.picked == {}  # the head ran in torch, after the call: the rows are left to the sampler
    assert torch.equal(adapted[0], plain[0]) and torch.equal(adapted[2], plain[2])
    assert (adapted[1] - plain[1]).abs().max() > 1e-3  # the adapter changes its row
    assert torch.allclose(adapted, expected, rtol=1e-4, atol=1e-4)


def test_a_token_outside_the_vocabulary_is_refused_before_anything_is_written(
    model: Any, step: NativeDecodeStep
) -> None:
    batch = read(model, PROMPTS[:1])
    keys = [k.clone() for k in batch.keys]
    with torch.inference_mode(), pytest.raises(ValueError, match="outside the vocabulary"):
        step.step([model.config.vocab_size], batch, [None])
    for k, kept in zip(batch.keys, keys, strict=True):  # whatever lies past the row's positions included
        torch.testing.assert_close(k, kept, rtol=0, atol=0, equal_nan=True)


def test_a_model_the_kernels_cannot_step_is_left_to_transformers(model: Any) -> None:
    assert native_step(model, None) is None
    model.config.hidden_act = "gelu"
    try:
        assert native_step(model, load_kernel()) is None
    finally:
        model.config.hidden_act = "silu"


def test_several_steps_in_one_call_pick_and_write_what_single_steps_do(model: Any, step: NativeDecodeStep) -> None:
    """Greedy steps taken in one call, each step's picks the next one's tokens: the very picks (token and log-prob)
    and keys and values of steps taken one call at a time."""
    ours, theirs = read(model, PROMPTS), read(model, PROMPTS)
    tokens = [p[-1] for p in PROMPTS]
    with torch.inference_mode():
        several = step.steps(tokens, ours, [None] * 3, 5, frozenset())
        ours.advance(len(several))
        single = []
        for _ in range(5):
            picked = step.step(tokens, theirs, [None] * 3, [True] * 3).picked
            theirs.advance()
            single.append([picked[row] for row in range(3)])
            tokens = [token for token, _ in single[-1]]
    assert several == single
    assert ours.lengths == theirs.lengths == [len(p) + 5 for p in PROMPTS]
    for layer in range(model.config.num_hidden_layers):
        for row, length in enumerate(ours.lengths):
            assert torch.equal(ours.keys[layer][row, :, :length], theirs.keys[layer][row, :, :length])
            assert torch.equal(ours.values[layer][row, :, :length], theirs.values[layer][row, :, :length])


def test_several_steps_end_with_the_step_that_picks_an_end_id(model: Any, step: NativeDecodeStep) -> None:
    tokens = [p[-1] for p in PROMPTS]
    with torch.inference_mode():
        all_five = step.steps(tokens, read(model, PROMPTS), [None] * 3, 5, frozenset())
        ending = all_five[1][2][0]  # the third row's second pick
        until_it = step.steps(tokens, read(model, PROMPTS), [None] * 3, 5, frozenset({ending, 10_000}))
    first = next(at for at, picks in enumerate(all_five) if any(token == ending for token, _ in picks))
    assert until_it == all_five[: first + 1]


def test_the_step_refuses_a_cache_whose_values_are_not_fp16(model: Any, step: NativeDecodeStep) -> None:
    """Decoding through transformers' forward pass keeps values in fp32; the kernel reads fp16 ones only."""
    batch = BatchCache(torch.float32)
    batch.add(read_one(model, PROMPTS[0]))
    with pytest.raises(ValueError, match="fp16 values"), torch.inference_mode():
        step.step([PROMPTS[0][-1]], batch, [None])
