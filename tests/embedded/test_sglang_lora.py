"""LoRA adapters through the sglang engine (a fake SGLang server): SGLang is launched with `--enable-lora`; each
scenario's adapter is loaded by name, its requests name it, their tokens carry its version; a new version loads
under a new name and the old one is unloaded only after the requests it serves have ended."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import torch
from aiohttp.test_utils import TestServer

from reef_daemon.recipe_api import Serving
from reef_daemon.recipe_host import resolve_recipe
from reef_daemon.runtimes.embedded.adapters import PEFT_PREFIX
from reef_daemon.runtimes.embedded.job import Finished, Job
from reef_daemon.runtimes.embedded.sampling import SamplingParams
from reef_daemon.runtimes.embedded.sglang import launch
from reef_daemon.runtimes.embedded.sglang.engine import SglangEngine, lora_launch
from reef_daemon.runtimes.embedded.text import TextAssembler
from reef_daemon.settings import EmbeddedSection, load_settings
from tests.support.fake_sglang import FakeSglang, model_folder
from tests.support.waiting import eventually

LORA = {"recipe": "sao", "training.lora-rank": "4", "training.lora-target-modules": "q_proj,v_proj"}


def adapter_state(seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    module = f"{PEFT_PREFIX}model.layers.0.self_attn.q_proj"
    return {
        f"{module}.lora_A.weight": torch.randn(4, 576, generator=generator),
        f"{module}.lora_B.weight": torch.randn(576, 4, generator=generator),
    }


def test_a_weight_recipe_training_adapters_launches_sglang_with_lora(tmp_path: Path) -> None:
    planned = lora_launch(serving(LORA))
    assert planned == launch.LoraLaunch(4, ("q_proj", "v_proj"))
    argv = launch.plan_launch(tmp_path, "v:0", EmbeddedSection(), tmp_path, planned).argv
    at = argv.index("--enable-lora")
    assert argv[at:] == (
        "--enable-lora", "--max-lora-rank", "4", "--lora-target-modules", "q_proj", "v_proj",
        "--max-loras-per-batch", "8",
    )  # fmt: skip
    for overrides in ({**LORA, "training.adapter": "full"}, {**LORA, "recipe": "record"}):
        assert lora_launch(serving(overrides)) is None
    by_class = {**LORA, "recipe": "recipes.sao.recipe:GrpoRecipe"}  # the recipe says so, whatever it is called
    assert lora_launch(serving(by_class)) == planned
    assert serving({**LORA, "training.trainer": "slime"}) == Serving(engines_started_by_trainer=True)


def serving(overrides: dict[str, str]) -> Serving:
    """What the recipe the settings name asks of the runtime."""
    settings = load_settings(overrides=overrides, environ={})
    return resolve_recipe(settings.recipe).serving(settings)


@pytest.fixture
async def engine(
    embedded_models: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[SglangEngine, FakeSglang]]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = model_folder(embedded_models)
    fake = FakeSglang(folder)
    server = TestServer(fake.app(), host="127.0.0.1")
    await server.start_server()
    overrides = {
        "reef.state-dir": str(tmp_path / "state"),
        "embedded.engine": "sglang",
        "embedded.sglang-url": str(server.make_url("")).rstrip("/"),
        "inference.model-path": str(folder),
        **LORA,
    }
    started = SglangEngine(load_settings(overrides=overrides, environ={}))
    await started.start()
    yield started, fake
    await started.close()
    await server.close()


def job_of(engine: SglangEngine, scenario: str, max_tokens: int) -> Job:
    prompt = engine.tokenizer.encode("The sea is")
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0)
    text = TextAssembler(engine.tokenizer, ())
    loop = asyncio.get_running_loop()
    return Job(list(prompt), params, text, loop, engine.adapter_version(scenario), scenario=scenario)


async def finished(job: Job) -> Finished:
    while not isinstance(event := await asyncio.wait_for(job.events.get(), 120), Finished):
        pass
    return event


async def test_requests_name_their_scenarios_adapter_and_carry_its_version(
    engine: tuple[SglangEngine, FakeSglang],
) -> None:
    sglang, fake = engine
    assert sglang.serves_adapters
    version = await sglang.swap_adapter("alpha", adapter_state(1), 2.0)
    ((_, name, loaded),) = [entry for entry in fake.log if entry[0] == "load_lora"]
    assert loaded and name.startswith("alpha-") and sglang.adapter_version("alpha") == version
    config = json.loads((fake.adapters[name] / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"], config["target_modules"]) == (4, 8.0, ["q_proj"])

    alpha, plain = job_of(sglang, "alpha", 3), job_of(sglang, "plain", 3)
    for job in (alpha, plain):
        sglang.submit(job)
        assert (await finished(job)).reason in ("stop", "length")
    by_prompt = [body.get("lora_path") for body in fake.generate_bodies]
    assert by_prompt == [name, None]
    assert set(alpha.versions) == {version} and set(alpha.adapters) == {"alpha"}
    assert set(plain.versions) == {sglang.version} and set(plain.adapters) == {None}


async def test_a_new_version_loads_under_a_new_name_and_the_old_unloads_after_its_requests(
    engine: tuple[SglangEngine, FakeSglang],
) -> None:
    sglang, fake = engine
    first = await sglang.swap_adapter("alpha", adapter_state(1), 2.0)
    running = job_of(sglang, "alpha", 40)
    sglang.submit(running)
    await eventually(lambda: running.output_ids, 60, "the first adapter to serve the request's first token")
    second = await sglang.swap_adapter("alpha", adapter_state(2), 2.0)
    loads = [entry[1] for entry in fake.log if entry[0] == "load_lora"]
    assert len(loads) == 2 and loads[0] != loads[1]
    assert not [entry for entry in fake.log if entry[0] == "unload_lora"]  # still serving a request
    await finished(running)
    assert set(running.versions) == {first}  # the whole answer came from the adapter it started with
    await eventually(  # the engine unloads it right after the request ends
        lambda: any(entry[0] == "unload_lora" for entry in fake.log), 60, "the old adapter unloaded"
    )
    assert [entry for entry in fake.log if entry[0] == "unload_lora"] == [("unload_lora", loads[0], True)]
    assert list(fake.adapters) == [loads[1]]
    after = job_of(sglang, "alpha", 2)
    sglang.submit(after)
    await finished(after)
    assert fake.generate_bodies[-1]["lora_path"] == loads[1] and set(after.versions) == {second}
