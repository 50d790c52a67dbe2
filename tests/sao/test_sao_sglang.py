"""SAO with the `sglang` engine (a fake SGLang server generating with the embedded model): a torch training step
writes weights, reef loads them into the server between tokens, and the next answer carries the new version; a
refused load keeps the old version and the step says why; a rollout served before a restart on the same weights is
still trained on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import torch
from aiohttp.test_utils import TestServer

from tests.sao.test_sao_recipe import QUESTION, steps_reach
from tests.support.fake_sglang import FakeSglang, model_folder
from tests.support.waiting import eventually
from tests.support.weight_testing import StartWeightReef, WeightReef


@pytest.fixture
async def fake(embedded_models: Path) -> AsyncIterator[tuple[FakeSglang, str]]:
    server = FakeSglang(model_folder(embedded_models))
    test_server = TestServer(server.app(), host="127.0.0.1")
    await test_server.start_server()
    yield server, str(test_server.make_url("")).rstrip("/")
    await test_server.close()


async def through(start: StartWeightReef, fake: tuple[FakeSglang, str], embedded_models: Path) -> WeightReef:
    return await start(
        embedded__engine="sglang",
        embedded__sglang_url=fake[1],
        inference__model_path=str(model_folder(embedded_models)),
        training__adapter="full",  # the server's weights themselves are updated
    )


async def test_a_training_step_reaches_the_sglang_server_and_serves_the_next_answer(
    start_weight_reef: StartWeightReef, fake: tuple[FakeSglang, str], embedded_models: Path
) -> None:
    server = fake[0]
    reef = await through(start_weight_reef, fake, embedded_models)
    receipt, record = await reef.ask(QUESTION, temperature=1.0, seed=7)
    produced = record["tokens"]["versions"][0]
    assert server.generate_bodies[-1]["input_ids"] == record["tokens"]["prompt_ids"]
    before = server.model.model.norm.weight.detach().clone()

    await reef.report({"score": 1.0, "references": [receipt]})
    state = await steps_reach(reef, 1)
    metrics = state["last_step"]["metrics"]
    assert metrics["policy_updated"] is True
    new = metrics["weight_version"]
    assert new != produced and new.split(":")[0] == produced.split(":")[0] and server.version == new
    assert [entry for entry in server.log if entry[0] != "token"] == [
        ("pause", "retract"),
        ("update", new, True),
        ("continue",),
    ]
    assert not torch.equal(server.model.model.norm.weight.detach(), before)  # the trained weights are loaded

    _, next_record = await reef.ask(QUESTION)
    assert set(next_record["tokens"]["versions"]) == {new} and next_record["release"] == new


async def test_a_refused_sync_skips_the_step_with_the_reason_and_keeps_the_old_version(
    start_weight_reef: StartWeightReef, fake: tuple[FakeSglang, str], embedded_models: Path
) -> None:
    server = fake[0]
    server.refuse_updates = "CUDA out of memory"
    reef = await through(start_weight_reef, fake, embedded_models)
    receipt, record = await reef.ask(QUESTION, temperature=1.0, seed=7)
    old = record["tokens"]["versions"][0]

    await reef.report({"score": 1.0, "references": [receipt]})
    state = await eventually(
        reef.training, 120, "the step to end", satisfied=lambda s: s.get("steps", 0) >= 1 and not s["running_since"]
    )
    last = state["last_step"]
    assert last["result"] == "skipped"
    assert "the new weights did not reach the engine" in last["metrics"]["reason"]
    assert "CUDA out of memory" in last["metrics"]["reason"] and last["metrics"]["weight_version"] == old
    assert not server.paused
    _, next_record = await reef.ask(QUESTION)
    assert set(next_record["tokens"]["versions"]) == {old}


async def test_a_rollout_served_before_a_restart_on_the_same_weights_is_trained_on(
    start_weight_reef: StartWeightReef, fake: tuple[FakeSglang, str], embedded_models: Path
) -> None:
    first = await through(start_weight_reef, fake, embedded_models)
    receipt, record = await first.ask(QUESTION, temperature=1.0, seed=7)
    produced = set(record["tokens"]["versions"])
    await first.client.aclose()
    await first.server.close()

    again = await through(start_weight_reef, fake, embedded_models)
    status = (await again.client.get("/reef/status")).json()
    assert {status["runtime"]["weight_version"]} == produced  # the same weights: the same version
    await again.report({"score": 1.0, "references": [receipt]})
    state = await steps_reach(again, 1)
    assert state["last_step"]["result"] != "skipped" and state["last_step"]["metrics"]["policy_updated"] is True
