"""What the decoding copies of the weights cost in log-probs: SmolLM2 decoding a fixed text token by token through
the native step, against the fp32 weights that train reading it whole. fp16 stays within the precision module's
0.02 nats; int8 (`embedded.decode-weights`) within what its setting's help says, and picks the same greedy token
nearly everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from reef_daemon.runtimes.embedded.batch import BatchCache
from reef_daemon.runtimes.embedded.decode_kernel import load_kernel
from reef_daemon.runtimes.embedded.decode_step import native_step
from reef_daemon.runtimes.embedded.loading import load_model, resolve_source

TEXT = (
    "The sailors left the harbour at dawn, hoping the wind would carry them to the island before nightfall. "
    "Their captain, an old woman who had crossed the strait a hundred times, watched the clouds gather in the west "
    "and ordered the smaller sail raised. By noon the sea had turned grey, and the gulls had gone quiet."
)


def decoding_errors(state: Path, int8: bool) -> tuple[list[float], float]:
    """|log-prob of the next token decoded - the same by the fp32 weights| at every position after the first 8,
    and the share of positions whose greedy token is the fp32 one."""
    from transformers import DynamicCache

    loaded = load_model(resolve_source(None), state, int8)
    model = loaded.model
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
            decoded = torch.log_softmax(step.logits([ids[position]], batch, [None])[0].float(), -1)
            batch.advance()
            errors.append(abs(float(decoded[ids[position + 1]] - whole[position, ids[position + 1]])))
            agree += int(decoded.argmax() == whole[position].argmax())
    return errors, agree / len(errors)


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory, embedded_models: Path) -> Path:
    made = tmp_path_factory.mktemp("state")
    (made / "models").symlink_to(embedded_models)
    return made


def test_fp16_decoding_stays_within_two_hundredths_of_a_nat_of_fp32(state: Path) -> None:
    errors, agree = decoding_errors(state, int8=False)
    assert len(errors) > 50
    assert max(errors) < 0.02 and agree == 1.0


def test_int8_decoding_stays_within_its_documented_tolerance(state: Path) -> None:
    errors, agree = decoding_errors(state, int8=True)
    assert sum(errors) / len(errors) < 0.02 and max(errors) < 0.1
    assert agree >= 0.95
    fp16, _ = decoding_errors(state, int8=False)
    assert sum(errors) > sum(fp16)  # it is the int8 copies that decoded: they cost more than fp16's
