"""Weights swapped in while a stream is being generated: the tokens after the swap carry the new version."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from safetensors.torch import load_file

from tests.support.embedded_running import SCENARIO, RunningReef, assert_token_data

# Long enough that the stream is still going when the swap lands a few tokens in.
COUNTING: list[Any] = [{"role": "user", "content": "Count from 1 to 100, separated by commas."}]


def test_swap_mid_stream_stamps_later_tokens_with_the_new_version(reef: RunningReef) -> None:
    before = reef.runtime.weight_version
    weights = load_file(str(reef.runtime.weights_dir / "model.safetensors"))
    receipt, deltas, swapped = None, 0, None
    headers = {"x-reef-scenario": SCENARIO}
    with openai.OpenAI(base_url=f"{reef.url}/v1", api_key="unused", default_headers=headers) as client:
        stream = client.chat.completions.create(
            model="smollm2", messages=COUNTING, max_tokens=64, temperature=0, stream=True
        )
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                deltas += 1
                if deltas == 3:
                    new = {"model.norm.weight": weights["model.norm.weight"]}
                    swapped = reef.call(reef.runtime.swap_weights(new))
            receipt = (chunk.model_extra or {}).get("reef", {}).get("agent_record_id", receipt)
    assert swapped is not None and receipt is not None
    incarnation, _, sequence = before.rpartition(":")
    swapped_incarnation, _, swapped_sequence = swapped.rpartition(":")
    # Numbers taken by earlier runs on this machine are skipped, never reused.
    assert swapped_incarnation == incarnation and int(swapped_sequence) > int(sequence)

    versions = assert_token_data(reef.record(receipt))["versions"]
    first_new = versions.index(swapped)
    assert first_new >= 3
    assert versions == [before] * first_new + [swapped] * (len(versions) - first_new)
    assert reef.record(receipt)["release"] == swapped
    assert httpx.get(f"{reef.url}/reef/status").json()["runtime"]["weight_version"] == swapped


def test_a_refused_swap_keeps_the_serving_weights(reef: RunningReef) -> None:
    before = reef.runtime.weight_version
    with pytest.raises(KeyError):
        reef.call(reef.runtime.swap_weights({"no.such.weight": load_file_tensor(reef)}))
    assert reef.runtime.weight_version == before


def load_file_tensor(reef: RunningReef) -> Any:
    return load_file(str(reef.runtime.weights_dir / "model.safetensors"))["model.norm.weight"]
