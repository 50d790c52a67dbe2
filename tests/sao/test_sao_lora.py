"""SAO with LoRA adapters (training.adapter = lora, the default) on the real embedded model: each scenario trains
its own adapter on one daemon and a step in one leaves the others' answers bit for bit; rollback swaps an adapter
only; a restart serves each scenario's latest adapter; a version saved with `reef versions --save` loads in peft
and gives the trainer's numbers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from recipes.sao.policy import quiet_peft
from recipes.sao.recipe import SaoRecipe
from reef_cli.app import app
from reef_daemon.runtimes.embedded import EmbeddedRuntime
from tests.sao.test_sao_recipe import QUESTION, rollout_of
from tests.support.app_servers import url_of
from tests.support.waiting import eventually
from tests.support.weight_testing import StartWeightReef, WeightReef


async def greedy(reef: WeightReef, scenario: str, question: str = QUESTION) -> dict[str, Any]:
    body = {"model": "m", "messages": [{"role": "user", "content": question}], "max_tokens": 12, "temperature": 0}
    response = await reef.client.post("/v1/chat/completions", json=body, headers={"x-reef-scenario": scenario})
    assert response.status_code == 200, response.text
    tokens: dict[str, Any] = (await reef.record(response.headers["x-reef-agent-record-id"]))["tokens"]
    return tokens


async def train_once(reef: WeightReef, scenario: str, seed: int, steps: int = 1) -> dict[str, Any]:
    """One scored rollout of `scenario`, trained on; the step's row."""
    body = {"model": "m", "messages": [{"role": "user", "content": QUESTION}], "max_tokens": 8, "temperature": 1.0,
            "seed": seed}  # fmt: skip
    headers = {"x-reef-scenario": scenario}
    answer = await reef.client.post("/v1/chat/completions", json=body, headers=headers)
    receipt = answer.headers["x-reef-agent-record-id"]
    report = await reef.client.post("/reef/report", json={"score": 1.0, "references": [receipt]}, headers=headers)
    assert report.status_code == 200, report.text

    async def training() -> dict[str, Any]:
        status = (await reef.client.get("/reef/status")).json()
        return dict(status["training"]["scenarios"].get(scenario, {}))

    state = await eventually(
        training, 180, f"{scenario} to train", satisfied=lambda s: s.get("steps", 0) >= steps and not s["running_since"]
    )
    step: dict[str, Any] = state["last_step"]
    return step


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return bool(a["output_ids"] == b["output_ids"] and a["logprobs"] == b["logprobs"])


async def test_two_scenarios_train_their_own_adapters_and_leave_each_other_be(
    start_weight_reef: StartWeightReef,
) -> None:
    reef = await start_weight_reef()
    toy_before, other_before = await greedy(reef, "toy"), await greedy(reef, "other")
    base = reef.daemon.runtime
    assert isinstance(base, EmbeddedRuntime)
    assert toy_before["adapters"] == [None] * len(toy_before["output_ids"])  # no adapter before a step

    step = await train_once(reef, "toy", seed=7)
    assert step["metrics"]["policy_updated"] is True and step["metrics"]["adapter"] == "lora"
    toy_after, other_after = await greedy(reef, "toy"), await greedy(reef, "other")
    assert same(other_after, other_before)  # bit for bit
    assert toy_after["logprobs"] != toy_before["logprobs"]
    assert set(toy_after["versions"]) == {step["metrics"]["weight_version"]}
    assert set(toy_after["adapters"]) == {"toy"}

    other_step = await train_once(reef, "other", seed=8)
    assert other_step["metrics"]["weight_version"] != step["metrics"]["weight_version"]
    assert same(await greedy(reef, "toy"), toy_after)  # the other scenario's step left toy's adapter be
    assert (await greedy(reef, "other"))["logprobs"] != other_before["logprobs"]
    recipe = (await reef.client.get("/reef/status")).json()["recipe"]
    assert recipe["weights"] == "lora" and set(recipe["adapters"]) == {"toy", "other"}
    assert base.weight_version == other_before["versions"][0]  # the base was never swapped

    exported = await reef.client.get("/reef/export", params={"scenario": "toy", "format": "tokens"})
    lines = [json.loads(line) for line in exported.text.splitlines() if line.strip()]
    assert any(line.get("adapters") == toy_after["adapters"] for line in lines)


async def test_rollback_swaps_the_adapter_only_a_restart_serves_the_latest_and_save_loads_in_peft(
    start_weight_reef: StartWeightReef, tmp_path: Path
) -> None:
    reef = await start_weight_reef()
    before = await greedy(reef, "toy")
    _, record = await reef.ask(QUESTION, temperature=1.0, seed=3)
    await train_once(reef, "toy", seed=3)
    trained = await greedy(reef, "toy")
    runtime = reef.daemon.runtime
    assert isinstance(runtime, EmbeddedRuntime)
    base_version, load_s = runtime.weight_version, runtime.describe()["load_s"]
    first, latest = reef.daemon.recipe.status()["checkpoints"]  # the zero adapter as first served, then step 1

    rolled = await reef.client.post("/reef/scenarios/toy/rollback", json={"release_id": first})
    assert rolled.status_code == 200, rolled.text
    assert same(await greedy(reef, "toy"), before)  # a zero adapter: the base's exact tokens
    assert (runtime.weight_version, runtime.describe()["load_s"]) == (base_version, load_s)  # no base reload
    forward = await reef.client.post("/reef/scenarios/toy/rollback", json={"release_id": latest})
    assert forward.status_code == 200, forward.text
    assert same(await greedy(reef, "toy"), trained)

    saved = tmp_path / "adapter"
    listed = await asyncio.to_thread(
        CliRunner().invoke,
        app,
        ["versions", "--scenario", "toy", "v1", "--save", str(saved), "--url", url_of(reef.server)],
    )
    assert listed.exit_code == 0, listed.output
    assert sorted(path.name for path in saved.iterdir()) == ["adapter_config.json", "adapter_model.safetensors"]
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base: Any = AutoModelForCausalLM.from_pretrained(runtime.weights_dir, dtype=torch.float32, local_files_only=True)
    with quiet_peft():
        loaded: Any = PeftModel.from_pretrained(base, saved)
    rollout = rollout_of(reef, record)
    ids = torch.tensor([list(rollout.prompt_ids) + list(rollout.output_ids)])
    with torch.inference_mode():
        logits = loaded(input_ids=ids).logits[0, len(rollout.prompt_ids) - 1 : -1]
    picked = torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(rollout.output_ids)[:, None]).squeeze(1)
    recipe = reef.daemon.recipe
    assert isinstance(recipe, SaoRecipe)
    trainer = recipe.trainer_of("toy")
    assert trainer is not None
    assert [float(x) for x in picked] == pytest.approx(trainer.logprobs(rollout), abs=1e-5)
    await reef.server.close()

    again = await start_weight_reef()
    assert same(await greedy(again, "toy"), trained)  # the latest adapter, restored on start


async def test_every_adapter_version_is_saveable_restorable_and_served_after_a_restart(
    start_weight_reef: StartWeightReef, tmp_path: Path
) -> None:
    """With the default training.checkpoint-every (10), the versions of one or two steps are still releases."""
    reef = await start_weight_reef(training__checkpoint_every="10")
    url = url_of(reef.server)
    await train_once(reef, "toy", seed=3)
    first = await greedy(reef, "toy")
    await train_once(reef, "toy", seed=4, steps=2)
    second = await greedy(reef, "toy")

    def cli(*arguments: str) -> Any:
        return CliRunner().invoke(app, [*arguments, "--scenario", "toy", "--url", url])

    saved = await asyncio.to_thread(cli, "versions", "v1", "--save", str(tmp_path / "v1"))
    assert saved.exit_code == 0, saved.output
    assert sorted(path.name for path in (tmp_path / "v1").iterdir()) == [
        "adapter_config.json",
        "adapter_model.safetensors",
    ]
    rolled = await asyncio.to_thread(cli, "rollback", "v1")
    assert rolled.exit_code == 0, rolled.output
    assert same(await greedy(reef, "toy"), first)
    forward = await asyncio.to_thread(cli, "rollback", "v2")
    assert forward.exit_code == 0, forward.output
    assert same(await greedy(reef, "toy"), second)
    await reef.server.close()

    again = await start_weight_reef(training__checkpoint_every="10")
    assert same(await greedy(again, "toy"), second)  # the trained steps survive the restart
