"""The generation thread outlives a failed adapter spill or read-back: the swap or the one scenario's request fails
with the reason while every other request is answered; and should the thread stop all the same, it says why and
takes no more requests. The model is a tiny random Llama with one adapter resident, so a second one spills."""

from __future__ import annotations

import asyncio
import errno
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from reef_daemon.errors import UpstreamFailed
from reef_daemon.runtimes.embedded import adapters as adapters_module
from reef_daemon.runtimes.embedded import runtime as runtime_module
from reef_daemon.runtimes.embedded.adapters import PEFT_PREFIX, AdapterUnavailable, LoraAdapter, lora_layers
from reef_daemon.runtimes.embedded.job import Finished, Job
from reef_daemon.runtimes.embedded.loading import LoadedModel
from reef_daemon.runtimes.embedded.runtime import EmbeddedRuntime
from reef_daemon.runtimes.embedded.sampling import SamplingParams
from reef_daemon.runtimes.embedded.text import TextAssembler
from reef_daemon.runtimes.embedded.worker import GenerationWorker
from reef_daemon.settings import load_settings

LAYER = "model.layers.0.self_attn.q_proj"
WAIT_S = 300  # a guard against a hang, never reached by a passing test


class CharTokenizer:
    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(65 + i % 26) for i in ids)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> LoadedModel:
    from transformers import LlamaConfig, LlamaForCausalLM

    from reef_daemon.runtimes.embedded.batch import use_row_attention

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=True,
    )  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    use_row_attention(model)
    folder = tmp_path_factory.mktemp("tiny-llama")
    return LoadedModel("tiny", model, CharTokenizer(), folder, folder, cold=False)


@pytest.fixture
def worker(loaded: LoadedModel, tmp_path: Path) -> Iterator[GenerationWorker]:
    made = GenerationWorker(loaded, frozenset(), tmp_path / "spilled", resident_adapters=1)
    made.start()
    yield made
    made.close()


def adapter(scenario: str, seed: int) -> LoraAdapter:
    generator = torch.Generator().manual_seed(seed)
    state = {
        f"{PEFT_PREFIX}{LAYER}.lora_A.weight": torch.randn(2, 32, generator=generator),
        f"{PEFT_PREFIX}{LAYER}.lora_B.weight": torch.randn(32, 2, generator=generator),
    }
    return LoraAdapter(scenario, "", 1.0, lora_layers(state))


async def swap(worker: GenerationWorker, scenario: str, seed: int) -> str:
    return await asyncio.wait_for(asyncio.wrap_future(worker.swap(adapter(scenario, seed))), WAIT_S)


async def answer(worker: GenerationWorker, scenario: str | None) -> Finished:
    job = Job(
        prompt_ids=[1, 2, 3, 4],
        params=SamplingParams(max_tokens=6, temperature=0.0),
        text=TextAssembler(CharTokenizer(), ()),
        loop=asyncio.get_running_loop(),
        admitted_version=worker.version_of(scenario),
        scenario=scenario,
    )
    worker.submit(job)
    while True:
        event = await asyncio.wait_for(job.events.get(), WAIT_S)
        if isinstance(event, Finished):
            return event


async def test_a_full_spill_folder_fails_the_swap_and_every_scenario_is_still_served(
    worker: GenerationWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    await swap(worker, "one", 1)

    def disk_full(*_args: Any, **_kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(adapters_module, "save_file", disk_full)
    with pytest.raises(AdapterUnavailable, match=r"adapter of two was not swapped in: .*No space left on device"):
        await swap(worker, "two", 2)
    for scenario in ("one", "two", None):
        assert (await answer(worker, scenario)).reason == "length"
    assert worker.failure is None and worker.adapters.scenarios == ["one"]


async def test_a_corrupt_spilled_adapter_fails_its_scenario_alone_until_a_new_one_comes(
    worker: GenerationWorker, tmp_path: Path
) -> None:
    await swap(worker, "one", 1)
    await swap(worker, "two", 2)  # "one" spills
    (tmp_path / "spilled" / "one.safetensors").write_bytes(b"\x00" * 64)
    for _ in range(2):
        failed = await answer(worker, "one")
        assert failed.reason == "error" and failed.error is not None
        assert "the LoRA adapter of one" in failed.error and "could not be read back from" in failed.error
        assert (await answer(worker, "two")).reason == "length"
    await swap(worker, "one", 11)
    assert (await answer(worker, "one")).reason == "length"
    assert worker.failure is None


async def test_a_stopped_generation_thread_says_why_and_takes_no_more_requests(
    worker: GenerationWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> None:
        raise RuntimeError("a fault nobody foresaw")

    monkeypatch.setattr(worker, "_drop_cancelled", broken)
    stopped = await answer(worker, None)
    assert stopped.reason == "error" and "generation thread stopped" in (stopped.error or "")
    assert worker.failure is not None and "a fault nobody foresaw" in worker.failure
    with pytest.raises(RuntimeError, match="generation thread stopped"):
        await answer(worker, None)


class ThreeTokenPrompts:
    def apply_chat_template(self, messages: list[dict[str, str]], **_options: Any) -> list[int]:
        return [1, 2, 3]


class StoppedEngine:
    """An engine whose generation thread has stopped: it refuses every job, saying why."""

    name = "stopped"
    model_name = "stopped"
    context_length = 1000
    version = "test:0"
    failure = "the embedded model's generation thread stopped (RuntimeError: boom); restart reef"
    tokenizer = ThreeTokenPrompts()

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def submit(self, job: Job) -> None:
        raise RuntimeError(self.failure)


async def test_a_request_the_stopped_engine_cannot_take_is_refused_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime_module, "build_engine", lambda _settings: StoppedEngine())
    runtime = EmbeddedRuntime(load_settings(overrides={"reef.state-dir": str(tmp_path)}, environ={}))
    await runtime.start()
    try:
        assert runtime.failure() == StoppedEngine.failure
        payload = {"messages": [{"role": "user", "content": "hi"}]}
        with pytest.raises(UpstreamFailed, match="generation thread stopped") as refused:
            await runtime.send("/v1/chat/completions", json.dumps(payload).encode(), payload, {})
        assert refused.value.status == 502
    finally:
        await runtime.close()
