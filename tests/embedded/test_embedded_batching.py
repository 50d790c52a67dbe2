"""Concurrent requests decoded together: the same tokens as alone, every stream advancing, swaps exact per token,
and one sequence cancelled without disturbing the others."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest
import torch
from safetensors.torch import load_file

from tests.support.embedded_running import SCENARIO, RunningReef, assert_token_data

HEADERS = {"x-reef-scenario": SCENARIO}
COUNTING = "Count from 1 to 100, separated by commas."
PROMPTS = [COUNTING, "What is the capital of France?", "Name three colours.", "Write a haiku about the sea."]


@pytest.fixture(scope="module")
def oai(reef: RunningReef) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{reef.url}/v1", api_key="unused", default_headers=HEADERS) as client:
        yield client


def greedy(reef: RunningReef, prompt: str, max_tokens: int) -> dict[str, Any]:
    body = {"model": "smollm2", "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens}
    response = httpx.post(
        f"{reef.url}/v1/chat/completions", headers=HEADERS, json={**body, "temperature": 0}, timeout=300
    )
    assert response.status_code == 200, response.text
    return assert_token_data(reef.record(response.headers["x-reef-agent-record-id"]))


def stream(oai: openai.OpenAI, prompt: str, max_tokens: int, on_delta: Any = None) -> str:
    """Stream a greedy answer, calling `on_delta(count)` after each text delta; returns the receipt."""
    chunks = oai.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": prompt}],
        max_tokens=max_tokens,
        temperature=0,
        stream=True,
    )
    receipt, deltas = "", 0
    for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta.content:
            deltas += 1
            if on_delta is not None and on_delta(deltas) is False:
                chunks.close()
                return receipt
        receipt = (chunk.model_extra or {}).get("reef", {}).get("agent_record_id", receipt)
    return receipt


def test_batched_greedy_gives_the_tokens_of_one_at_a_time(reef: RunningReef) -> None:
    alone = [greedy(reef, prompt, 24)["output_ids"] for prompt in PROMPTS]
    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        together = list(pool.map(lambda prompt: greedy(reef, prompt, 24)["output_ids"], PROMPTS))
    assert together == alone
    assert httpx.get(f"{reef.url}/reef/status").json()["runtime"]["peak_batch"] >= 3


def test_concurrent_streams_all_progress(oai: openai.OpenAI) -> None:
    """Every stream has its fifth token before any stream ends."""
    fifth: dict[int, float] = {}
    ended: dict[int, float] = {}

    def run(index: int) -> None:
        def seen(count: int) -> None:
            if count == 5:
                fifth[index] = time.monotonic()

        stream(oai, COUNTING, 40, seen)
        ended[index] = time.monotonic()

    with ThreadPoolExecutor(3) as pool:
        list(pool.map(run, range(3)))
    assert len(fifth) == 3
    assert max(fifth.values()) < min(ended.values())


def test_a_swap_during_a_batch_is_exact_per_token(reef: RunningReef, oai: openai.OpenAI) -> None:
    """Each token's recorded log-prob is the one the weights its version names give it."""
    before = reef.runtime.weight_version
    original = load_file(str(reef.runtime.weights_dir / "model.safetensors"))["model.norm.weight"]
    sharper = {"model.norm.weight": original * 1.5}
    swapped: list[str] = []
    started = threading.Event()

    def swap_at_third(count: int) -> None:
        if count == 3 and not swapped:
            assert started.wait(timeout=120)
            swapped.append(reef.call(reef.runtime.swap_weights(sharper)))

    def mark_started(count: int) -> None:
        started.set()

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(stream, oai, COUNTING, 32, swap_at_third)
        second = pool.submit(stream, oai, PROMPTS[3], 32, mark_started)
        records = [assert_token_data(reef.record(future.result())) for future in (first, second)]
    reef.call(reef.runtime.swap_weights({"model.norm.weight": original}))

    (after,) = swapped
    for tokens in records:
        versions = tokens["versions"]
        changed = versions.index(after) if after in versions else len(versions)
        assert versions == [before] * changed + [after] * (len(versions) - changed)
    assert after in records[0]["versions"][3:]

    from transformers import AutoModelForCausalLM

    model: Any = AutoModelForCausalLM.from_pretrained(reef.runtime.weights_dir, dtype=torch.float32)
    old = [teacher_logprobs(model, tokens) for tokens in records]
    model.model.norm.weight.data.copy_(sharper["model.norm.weight"])
    new = [teacher_logprobs(model, tokens) for tokens in records]
    differs = False
    for tokens, old_lp, new_lp in zip(records, old, new, strict=True):
        for recorded, version, lp_old, lp_new in zip(
            tokens["logprobs"], tokens["versions"], old_lp, new_lp, strict=True
        ):
            expected = lp_new if version == after else lp_old
            assert abs(recorded - expected) < 0.05
            differs = differs or abs(lp_old - lp_new) > 0.1
    assert differs  # the two weight sets do tell the tokens apart


def test_a_swap_that_moves_a_weight_off_its_grid_decodes_it_from_fp16_from_then_on(reef: RunningReef) -> None:
    """The embedded model decodes from 4-bit and 8-bit copies that are its GGUF's weights exactly; a weight a swap
    moves off that grid gets an fp16 copy, and a swap back gets its exact copy again. Tokens keep the teacher's
    log-probs."""

    def decoding() -> str:
        return str(httpx.get(f"{reef.url}/reef/status").json()["runtime"]["decoding"])

    assert decoding().startswith("int4 for 210 of 211 weights, int8 for the rest, reef kernel ("), decoding()
    name = "model.layers.3.mlp.down_proj.weight"
    original = load_file(str(reef.runtime.weights_dir / "model.safetensors"))[name]
    moved = original + torch.randn(original.shape, generator=torch.Generator().manual_seed(1)) * 1e-3
    reef.call(reef.runtime.swap_weights({name: moved}))
    try:
        moved_one = "int4 for 209 of 211 weights, int8 for 1, fp16 for the rest, reef kernel ("
        assert decoding().startswith(moved_one), decoding()
        tokens = greedy(reef, PROMPTS[1], 24)
        from transformers import AutoModelForCausalLM

        model: Any = AutoModelForCausalLM.from_pretrained(reef.runtime.weights_dir, dtype=torch.float32)
        model.get_parameter(name).data.copy_(moved)
        for recorded, expected in zip(tokens["logprobs"], teacher_logprobs(model, tokens), strict=True):
            assert abs(recorded - expected) < 0.02
    finally:
        reef.call(reef.runtime.swap_weights({name: original}))
    assert decoding().startswith("int4 for 210 of 211 weights, int8 for the rest, reef kernel ("), decoding()


def teacher_logprobs(model: Any, tokens: dict[str, Any]) -> list[float]:
    """The log-prob of each output token given everything before it, from one forward pass."""
    ids = tokens["prompt_ids"] + tokens["output_ids"]
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    start = len(tokens["prompt_ids"])
    log_probs = torch.log_softmax(logits[start - 1 : -1], dim=-1)
    return [float(log_probs[i, token]) for i, token in enumerate(tokens["output_ids"])]


def test_cancelling_one_sequence_leaves_the_others(reef: RunningReef, oai: openai.OpenAI) -> None:
    alone = greedy(reef, COUNTING, 40)["output_ids"]

    def leave_at_third(count: int) -> bool:
        return count < 3

    with ThreadPoolExecutor(3) as pool:
        left = pool.submit(stream, oai, COUNTING, 40, leave_at_third)
        staying = [pool.submit(stream, oai, COUNTING, 40) for _ in range(2)]
        receipts = [future.result() for future in staying]
        left.result()
    for receipt in receipts:
        record = reef.record(receipt)
        assert record["complete"] is True
        assert assert_token_data(record)["output_ids"] == alone
