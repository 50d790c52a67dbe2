"""LoRA adapters served per scenario by the embedded model: the tokens a peft model with the adapter gives, rows of
different adapters decoded together exactly as alone, and one scenario's swap leaving the others' streams be."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest
import torch

from recipes.sao.policy import quiet_peft
from tests.support.embedded_running import RunningReef, assert_token_data

PROMPTS = ["Count from 1 to 100, separated by commas.", "What is the capital of France?", "Name three colours."]
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]
RANK, ALPHA = 8, 16


def peft_adapter(weights_dir: Any, seed: int) -> tuple[Any, dict[str, torch.Tensor]]:
    """A fp32 peft model on the base with a random (non-zero) adapter, and that adapter's tensors as PEFT saves
    them."""
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict
    from transformers import AutoModelForCausalLM

    base: Any = AutoModelForCausalLM.from_pretrained(weights_dir, dtype=torch.float32, local_files_only=True)
    config = LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=TARGETS, task_type="CAUSAL_LM")
    torch.manual_seed(seed)  # lora_A's initialisation
    with quiet_peft():
        model: Any = get_peft_model(base, config)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.1)
    model.eval()
    return model, get_peft_model_state_dict(model)


@pytest.fixture(scope="module")
def adapters(reef: RunningReef) -> Iterator[dict[str, Any]]:
    """Two adapters, `alpha` and `beta`, served for the scenarios of those names (`plain` has none)."""
    alpha, alpha_state = peft_adapter(reef.runtime.weights_dir, 1)
    _, beta_state = peft_adapter(reef.runtime.weights_dir, 2)
    versions = {
        "alpha": reef.call(reef.runtime.swap_adapter("alpha", alpha_state, ALPHA / RANK)),
        "beta": reef.call(reef.runtime.swap_adapter("beta", beta_state, ALPHA / RANK)),
    }
    yield {"alpha": alpha, "alpha_state": alpha_state, "beta_state": beta_state, "versions": versions}


def greedy(reef: RunningReef, scenario: str, prompt: str, max_tokens: int = 24) -> dict[str, Any]:
    body = {"model": "smollm2", "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens}
    response = httpx.post(
        f"{reef.url}/v1/chat/completions",
        headers={"x-reef-scenario": scenario},
        json={**body, "temperature": 0},
        timeout=300,
    )
    assert response.status_code == 200, response.text
    return assert_token_data(reef.record(response.headers["x-reef-agent-record-id"]))


def teacher(model: Any, tokens: dict[str, Any]) -> tuple[list[int], list[float]]:
    """The argmax and the log-prob of each output token given everything before it, in one forward pass."""
    ids = tokens["prompt_ids"] + tokens["output_ids"]
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    start = len(tokens["prompt_ids"])
    log_probs = torch.log_softmax(logits[start - 1 : -1], dim=-1)
    picked = [int(token) for token in log_probs.argmax(dim=-1)]
    return picked, [float(log_probs[i, token]) for i, token in enumerate(tokens["output_ids"])]


def test_an_adapter_serves_the_tokens_of_a_peft_model_with_it(reef: RunningReef, adapters: dict[str, Any]) -> None:
    served = greedy(reef, "alpha", PROMPTS[1])
    version = adapters["versions"]["alpha"]
    assert served["versions"] == [version] * len(served["output_ids"])
    assert served["adapters"] == ["alpha"] * len(served["output_ids"])
    picked, logprobs = teacher(adapters["alpha"], served)
    assert served["output_ids"] == picked  # greedy under the adapter, token by token
    assert all(abs(a - b) < 0.05 for a, b in zip(served["logprobs"], logprobs, strict=True))

    plain = greedy(reef, "plain", PROMPTS[1])
    assert plain["adapters"] == [None] * len(plain["output_ids"])
    assert set(plain["versions"]) == {reef.runtime.weight_version}
    with adapters["alpha"].disable_adapter():
        assert teacher(adapters["alpha"], plain)[0] == plain["output_ids"]
    assert abs(plain["logprobs"][0] - served["logprobs"][0]) > 1e-3  # the adapter does change the numbers


def test_rows_of_different_adapters_decode_together_as_alone(reef: RunningReef, adapters: dict[str, Any]) -> None:
    jobs = [(scenario, prompt) for scenario in ("alpha", "beta", "plain") for prompt in PROMPTS[1:]]
    alone = {job: greedy(reef, *job) for job in jobs}
    before = reef.runtime.engine.describe()["peak_batch"]
    with ThreadPoolExecutor(len(jobs)) as pool:
        together = dict(zip(jobs, pool.map(lambda job: greedy(reef, *job), jobs), strict=True))
    assert reef.runtime.engine.describe()["peak_batch"] >= min(len(jobs), max(before, 2))
    for job in jobs:
        assert together[job]["output_ids"] == alone[job]["output_ids"], job
        assert together[job]["logprobs"] == alone[job]["logprobs"], job
        assert together[job]["versions"] == alone[job]["versions"], job


def test_a_swap_for_one_scenario_leaves_the_others_streams_be(reef: RunningReef, adapters: dict[str, Any]) -> None:
    beta_alone = greedy(reef, "beta", PROMPTS[0], 48)
    started = threading.Event()
    swapped: list[str] = []

    def beta_stream() -> dict[str, Any]:
        headers = {"x-reef-scenario": "beta"}
        with openai.OpenAI(base_url=f"{reef.url}/v1", api_key="unused", default_headers=headers) as client:
            chunks = client.chat.completions.create(
                model="smollm2", messages=[{"role": "user", "content": PROMPTS[0]}], max_tokens=48, temperature=0,
                stream=True,
            )  # fmt: skip
            receipt, deltas = "", 0
            for chunk in chunks:
                if chunk.choices and chunk.choices[0].delta.content:
                    deltas += 1
                    if deltas == 3:
                        started.set()
                receipt = (chunk.model_extra or {}).get("reef", {}).get("agent_record_id", receipt)
        assert receipt
        tokens: dict[str, Any] = reef.record(receipt)["tokens"]
        return tokens

    with ThreadPoolExecutor(1) as pool:
        beta = pool.submit(beta_stream)
        assert started.wait(timeout=120)
        swapped.append(reef.call(reef.runtime.swap_adapter("alpha", adapters["beta_state"], ALPHA / RANK)))
        streamed = beta.result()
    assert streamed["output_ids"] == beta_alone["output_ids"]
    assert set(streamed["versions"]) == {adapters["versions"]["beta"]}  # beta's adapter, never re-read
    alpha = greedy(reef, "alpha", PROMPTS[1])
    assert set(alpha["versions"]) == {swapped[0]} and swapped[0] != adapters["versions"]["alpha"]
    assert alpha["output_ids"] == greedy(reef, "beta", PROMPTS[1])["output_ids"]  # the same adapter now
    reef.call(reef.runtime.swap_adapter("alpha", adapters["alpha_state"], ALPHA / RANK))


def test_an_adapter_that_does_not_fit_is_refused_and_the_old_one_serves(
    reef: RunningReef, adapters: dict[str, Any]
) -> None:
    before = reef.runtime.adapter_version("alpha")
    wrong = {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": torch.zeros(8, 7),
             "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": torch.zeros(576, 8)}  # fmt: skip
    with pytest.raises(ValueError, match="q_proj"):
        reef.call(reef.runtime.swap_adapter("alpha", wrong, 2.0))
    assert reef.runtime.adapter_version("alpha") == before
    status = httpx.get(f"{reef.url}/reef/status").json()["runtime"]
    assert set(status["adapters"]["scenarios"]) >= {"alpha", "beta"} and status["adapters"]["resident_bytes"] > 0
