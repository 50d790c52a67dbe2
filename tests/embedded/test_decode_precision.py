"""What the decoding copies of the weights cost in log-probs: SmolLM2 decoding a fixed text token by token through
the native step, against the fp32 weights that train reading it whole. The default copies (`auto`) are the weights
themselves: what is left is the order of the sums and the 8-bit product's inputs, taken to 2^-16 of their block's
largest. fp16 stays within the precision module's 0.02 nats; int8
(`embedded.decode-weights`) within what its setting's help says, and picks the same greedy token nearly everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from reef_daemon.runtimes.embedded.batch import BatchCache
from reef_daemon.runtimes.embedded.decode_kernel import load_kernel
from reef_daemon.runtimes.embedded.decode_step import native_step
from reef_daemon.runtimes.embedded.loading import load_model, resolve_source
from reef_daemon.runtimes.embedded.precision import DecodeWeights, decode_copies, refresh_decode_copies

# What the order of the sums and the inputs' rounding in the 8-bit product move a log-prob by, at most (measured:
# 0.0025 at worst, 0.0004 on average; fp16 copies 0.005 and 0.0014)
DEFAULT_COPIES_NATS = 0.005
TEXT = (
    "The sailors left the harbour at dawn, hoping the wind would carry them to the island before nightfall. "
    "Their captain, an old woman who had crossed the strait a hundred times, watched the clouds gather in the west "
    "and ordered the smaller sail raised. By noon the sea had turned grey, and the gulls had gone quiet."
)


def decoding_errors(state: Path, weights: DecodeWeights, moved: bool = False) -> tuple[list[float], float]:
    """|log-prob of the next token decoded - the same by the fp32 weights| at every position after the first 8,
    and the share of positions whose greedy token is the fp32 one; with `moved`, every weight moved off its grid
    first (as training moves them) and its copies made again."""
    from transformers import DynamicCache

    loaded = load_model(resolve_source(None), state, weights)
    model = loaded.model
    if moved:
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(torch.randn(parameter.shape, generator=generator) * 1e-4)
        refresh_decode_copies(model, dict(model.named_parameters()))
    exact = "int4 for 210 of 211 weights, int8 for the rest"  # the GGUF's Q4_1 weights, and its Q8_0 head
    expected = {"int8": "int8 weights", "fp16": "fp16 weights"}.get(weights, "fp16 weights" if moved else exact)
    assert decode_copies(model) == expected
    ids = loaded.tokenizer(TEXT)["input_ids"]
    step = native_step(model, load_kernel())
    assert step is not None
    with torch.inference_mode():
        whole = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1)  # read at once: fp32
        cache = DynamicCache(config=model.config)
        model(input_ids=torch.tensor([ids[:8]]), cache=cache, use_cache=True)
        batch = BatchCache()
        batch.add(cache)
        errors, agree = [], 0
        for position in range(8, len(ids) - 1):
            decoded = torch.log_softmax(step.step([ids[position]], batch, [None]).logits[0].float(), -1)
            batch.advance()
            errors.append(abs(float(decoded[ids[position + 1]] - whole[position, ids[position + 1]])))
            agree += int(decoded.argmax() == whole[position].argmax())
    return errors, agree / len(errors)


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory, embedded_models: Path) -> Path:
    made = tmp_path_factory.mktemp("state")
    (made / "models").symlink_to(embedded_models)
    return made


def test_the_default_copies_decode_as_the_fp32_weights_do(state: Path) -> None:
    """Every weight of the GGUF is a byte on a grid: the 8-bit copies are exact, and decode closer to fp32 than fp16
    copies do."""
    errors, agree = decoding_errors(state, "auto")
    assert len(errors) > 50
    assert max(errors) < DEFAULT_COPIES_NATS and agree == 1.0
    fp16, _ = decoding_errors(state, "fp16")
    assert sum(errors) < sum(fp16) / 2


def test_fp16_decoding_stays_within_two_hundredths_of_a_nat_of_fp32(state: Path) -> None:
    errors, agree = decoding_errors(state, "fp16")
    assert len(errors) > 50
    assert max(errors) < 0.02 and agree == 1.0


def test_int8_decoding_stays_within_its_documented_tolerance(state: Path) -> None:
    """`int8` on weights that are not on a grid (the GGUF's, moved a little as training moves them)."""
    errors, agree = decoding_errors(state, "int8", moved=True)
    assert sum(errors) / len(errors) < 0.02 and max(errors) < 0.1
    assert agree >= 0.95
    fp16, _ = decoding_errors(state, "fp16", moved=True)
    assert sum(errors) > sum(fp16)  # it is the int8 copies that decoded: they cost more than fp16's
