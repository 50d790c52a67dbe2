"""The SAO recipe on the real embedded model: a scored rollout trains a step, the new weights serve the next
request, nothing trains twice, restarts resume from the last checkpoint, and rollback restores one."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from rich.console import Console
from typer.testing import CliRunner

from recipes.sao.examples.toy import task
from recipes.sao.recipe import SaoRecipe
from recipes.sao.rollout import Rollout, Staleness, judge_report
from reef_cli.app import app
from reef_cli.render.status import status_view
from reef_contract import StoredRecord
from reef_daemon.recipe_api import ReferencedRecord, Unit
from reef_daemon.runtimes.embedded.versions import sequence_ledger
from tests.support.app_servers import url_of
from tests.support.waiting import eventually
from tests.support.weight_testing import StartWeightReef, WeightReef

QUESTION = "Name a colour of the sky."


async def steps_reach(reef: WeightReef, count: int) -> dict[str, Any]:
    """Training's state once `count` steps are committed and none is running."""
    return await eventually(
        reef.training,
        120,
        f"training to reach {count} steps",
        satisfied=lambda state: state.get("steps", 0) >= count and state["running_since"] is None,
    )


def rollout_of(reef: WeightReef, record: dict[str, Any]) -> Rollout:
    recipe = reef.daemon.recipe
    assert isinstance(recipe, SaoRecipe)
    report = Unit(
        cast(StoredRecord, {"id": "probe", "score": 1.0}),
        (cast(ReferencedRecord, {**record, "consumed_by_step": None}),),
    )
    _, rollout = judge_report(report, record["tokens"]["versions"][0], Staleness(10**6, 10**6), set())
    assert rollout is not None
    return rollout


def policy_logprob(reef: WeightReef, rollout: Rollout) -> float:
    recipe = reef.daemon.recipe
    assert isinstance(recipe, SaoRecipe)
    trainer = recipe.trainer_of("toy")
    assert trainer is not None
    return sum(trainer.logprobs(rollout))


async def test_requests_that_set_no_sampling_are_sampled_on_policy(start_weight_reef: StartWeightReef) -> None:
    """The sao profile's defaults are temperature 1, top-p 1 (what exact ratios need), recorded and shown."""
    reef = await start_weight_reef()
    _, record = await reef.ask(QUESTION)
    sampling = record["tokens"]["sampling"]
    assert (sampling["temperature"], sampling["top_p"]) == (1.0, 1.0)
    assert sampling["defaulted"] == ["temperature", "top_p"]  # ask() sets max_tokens
    status = (await reef.client.get("/reef/status")).json()
    console = Console(record=True, width=200)
    console.print(status_view(status, "http://reef"))
    line = next(line for line in console.export_text().splitlines() if line.startswith("sampling"))
    assert "temperature 1, top-p 1," in line and "sao keeps temperature 1, top-p 1 for exact on-policy" in line


@pytest.mark.parametrize("score", [1.0, -1.0])
async def test_a_scored_rollout_trains_a_step_and_the_next_answer_uses_new_weights(
    start_weight_reef: StartWeightReef, score: float
) -> None:
    reef = await start_weight_reef(reports__score_min="-1")  # a scale with negative rewards
    receipt, record = await reef.ask(QUESTION, temperature=1.0, seed=7)
    produced = record["tokens"]["versions"][0]
    rollout = rollout_of(reef, record)
    before = policy_logprob(reef, rollout)

    await reef.report({"score": score, "references": [receipt]})
    state = await steps_reach(reef, 1)
    metrics = state["last_step"]["metrics"]
    assert metrics["policy_updated"] is True and metrics["mean_reward"] == score
    assert 0.0 <= metrics["masked_fraction"] <= 1.0 and metrics["ratio_min"] > 0
    after = policy_logprob(reef, rollout)
    if score > 0:
        assert after > before
    else:
        assert after < before

    _, next_record = await reef.ask(QUESTION)
    served_by = next_record["tokens"]["versions"][0]
    assert served_by == metrics["weight_version"] != produced
    assert served_by.split(":")[0] == produced.split(":")[0]  # same process, next version
    assert next_record["release"] == served_by

    await reef.report({"score": score, "references": [receipt]})  # the same rollout again
    state = await eventually(
        reef.training, 60, "the second report to be judged", satisfied=lambda s: s.get("ineligible")
    )
    assert state["steps"] == 1
    assert state["ineligible"] == {"the rollout was already trained on": 1}


async def test_a_critic_warm_up_step_makes_no_version_and_says_what_it_was(start_weight_reef: StartWeightReef) -> None:
    reef = await start_weight_reef(training__critic_warmup_steps="1")
    receipt, record = await reef.ask(QUESTION, temperature=1.0, seed=7)
    await reef.report({"score": 1.0, "references": [receipt]})
    step = (await steps_reach(reef, 1))["last_step"]
    assert (step["result"], step["version"], step["metrics"]["policy_updated"]) == ("skipped", None, False)
    assert step["metrics"]["reason"] == (
        "critic warm-up step 1 of 1: the value head trained, the weights did not change"
    )
    assert step["metrics"]["weight_version"] == record["tokens"]["versions"][0]
    assert step["metrics"]["value_min"] == step["metrics"]["value_max"] == 0.0  # the critic starts at V = 0

    second, _ = await reef.ask(QUESTION, temperature=1.0, seed=8)
    await reef.report({"score": 0.0, "references": [second]})
    trained = (await steps_reach(reef, 2))["last_step"]
    assert trained["version"] == "v1" and trained["metrics"]["policy_updated"] is True
    critic = (await reef.client.get("/reef/status")).json()["recipe"]["critic"]
    assert critic["window"] == 2 and critic["warmup_steps_left"] == 0
    assert critic["failed_positive_share"] == 0.0 and critic["explained_variance"] is not None

    url = url_of(reef.server)
    listed = await asyncio.to_thread(
        CliRunner().invoke, app, ["versions", "--scenario", "toy", "--url", url], env={"COLUMNS": "200"}
    )
    assert listed.exit_code == 0, listed.output
    assert "v1" in listed.stdout and "skipped" not in listed.stdout  # the warm-up step is not a version
    assert "1 critic-only steps (the value head trained, the weights did not change) are not" in listed.stderr
    status = await asyncio.to_thread(CliRunner().invoke, app, ["status", "--url", url], env={"COLUMNS": "200"})
    assert "critic" in status.stdout and "failed answers pushed up 0%" in status.stdout
    requests = await asyncio.to_thread(
        CliRunner().invoke, app, ["records", "--type", "train", "--scenario", "toy", "--url", url]
    )
    assert requests.exit_code == 0 and "no records match" in requests.stderr
    assert "its training steps are listed by `reef versions --scenario toy`" in " ".join(requests.stderr.split())


@pytest.mark.timeout(900)  # twelve steps and sixteen answers of the model: on a busy machine, minutes
async def test_a_few_steps_raise_the_critics_explained_variance_and_keep_held_out_answers(
    start_weight_reef: StartWeightReef,
) -> None:
    """A short learning run (fixed seeds): SAO trains on one capital question; a held-out one does not get worse,
    and the critic's explained variance rises."""
    reef = await start_weight_reef(training__critic_warmup_steps="2")
    trained, held_out = task.Prompt("France"), task.Prompt("Italy")

    async def answer(prompt: task.Prompt, seed: int) -> tuple[str, float]:
        body = {"model": "m", "messages": [{"role": "user", "content": prompt.text}], "temperature": 1.0, "seed": seed,
                "max_tokens": task.MAX_TOKENS}  # fmt: skip
        response = await reef.client.post("/v1/chat/completions", json=body, headers={"x-reef-scenario": "toy"})
        text = response.json()["choices"][0]["message"]["content"] or ""
        return response.headers["x-reef-agent-record-id"], task.score(prompt, text)

    async def pass_rate() -> float:  # the eight answers decode together
        return sum(score for _, score in await asyncio.gather(*(answer(held_out, s) for s in range(100, 108)))) / 8

    before = await pass_rate()
    explained = []
    for seed in range(12):
        receipt, reward = await answer(trained, seed)
        await reef.report({"score": reward, "references": [receipt]})
        metrics = (await steps_reach(reef, seed + 1))["last_step"]["metrics"]
        explained.append(metrics["explained_variance"])
    after = await pass_rate()
    known = [value for value in explained if value is not None]
    assert after >= before, (before, after)
    assert len(known) >= 2 and known[-1] > known[0], explained  # the critic explains more than it did


async def test_ineligible_reports_are_kept_with_their_reason(start_weight_reef: StartWeightReef) -> None:
    reef = await start_weight_reef(training__max_staleness="0")
    first, _ = await reef.ask(QUESTION)
    second, _ = await reef.ask(QUESTION)
    counted = await reef.client.post(
        "/v1/messages/count_tokens",
        json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        headers={"x-reef-scenario": "toy"},
    )
    no_tokens = counted.headers["x-reef-agent-record-id"]
    feedback_only = await reef.report({"feedback": "meh", "references": [first]})
    await reef.report({"score": 1, "references": [first, second]})
    await reef.report({"score": 1, "references": [no_tokens]})
    await reef.report({"score": 1, "references": [first]})  # eligible: trains, and moves the weights on
    await steps_reach(reef, 1)
    await reef.report({"score": 1, "references": [second]})  # now a version behind, with max-staleness 0
    state = await eventually(
        reef.training, 60, "four ineligible reports", satisfied=lambda s: sum(s.get("ineligible", {}).values()) == 4
    )
    assert state["ineligible"] == {
        "the report has no score": 1,
        "the report must reference exactly one inference record": 1,
        "the rollout has no token data from this runtime (it was not served by the model)": 1,
        "the rollout is older than training.max-staleness (0) allows": 1,
    }
    assert state["steps"] == 1
    shown = await reef.client.get(f"/reef/records/{feedback_only}")
    assert shown.json()["ineligible"] == "the report has no score"


async def test_a_rollout_one_swap_old_is_trained_on_whatever_numbers_other_daemons_took(
    start_weight_reef: StartWeightReef,
) -> None:
    """With full weights, staleness counts this daemon's swaps: its first swap claims a sequence number past every
    one other daemons with the same weights used (a shared ledger), which must not age the rollouts the loaded
    weights made. (A LoRA adapter's rollouts age in its scenario's own versions.)"""
    reef = await start_weight_reef(training__max_staleness="1", training__adapter="full")
    first, record = await reef.ask(QUESTION, temperature=1.0, seed=1)
    second, _ = await reef.ask(QUESTION, temperature=1.0, seed=2)
    incarnation, _, sequence = record["tokens"]["versions"][0].rpartition(":")
    assert sequence == "0"
    ledger = sequence_ledger(incarnation)
    ledger.parent.mkdir(parents=True, exist_ok=True)
    ledger.write_text("500\n")  # other daemons' swaps of the same weights
    await reef.report({"score": 1, "references": [first]})
    swapped = (await steps_reach(reef, 1))["last_step"]["metrics"]["weight_version"]
    assert int(swapped.rpartition(":")[2]) > 500
    await reef.report({"score": 0, "references": [second]})  # one swap behind, within max-staleness 1
    state = await steps_reach(reef, 2)
    assert state["ineligible"] == {} and state["last_step"]["metrics"]["policy_updated"] is True


async def test_restart_resumes_from_the_checkpoint_and_rollback_restores_one(
    start_weight_reef: StartWeightReef,
) -> None:
    reef = await start_weight_reef()
    receipt, record = await reef.ask(QUESTION, temperature=1.0, seed=3)
    rollout = rollout_of(reef, record)
    before = policy_logprob(reef, rollout)
    await reef.report({"score": 1.0, "references": [receipt]})
    trained = await steps_reach(reef, 1)
    checkpoint = trained["last_step"]["release_id"]
    trained_logprob = policy_logprob(reef, rollout)
    await reef.server.close()

    again = await start_weight_reef()
    assert again.daemon.recipe.current_release("toy") == checkpoint
    assert policy_logprob(again, rollout) == pytest.approx(trained_logprob, abs=1e-4)
    await again.report({"score": 1.0, "references": [receipt]})  # consumed before the restart
    state = await eventually(again.training, 60, "the report to be judged", satisfied=lambda s: s.get("ineligible"))
    assert state["steps"] == 1 and state["ineligible"] == {"the rollout was already trained on": 1}

    releases = (await again.client.get("/reef/scenarios/toy/releases")).json()["releases"]
    assert [row["current"] for row in releases] == [True]
    refused = await again.client.post("/reef/scenarios/toy/rollback", json={"release_id": "not-a-checkpoint"})
    assert refused.status_code == 409 and refused.json()["error"]["type"] == "not_restorable"

    base, latest = again.daemon.recipe.status()["checkpoints"]  # the weights as first served, then step 1
    assert latest == checkpoint
    rolled = await again.client.post("/reef/scenarios/toy/rollback", json={"release_id": base})
    assert rolled.status_code == 200, rolled.text
    step = rolled.json()
    assert step["operation"] == "rollback" and step["version"] == "v2" and step["current"] is True
    assert policy_logprob(again, rollout) == pytest.approx(before, abs=1e-4)
    _, served = await again.ask(QUESTION)
    assert served["tokens"]["versions"][0] == step["metrics"]["weight_version"]


async def test_reef_show_says_what_training_made_of_each_report(start_weight_reef: StartWeightReef) -> None:
    from rich.console import Console

    from reef_client.render.record import record_view

    reef = await start_weight_reef()
    receipt, _ = await reef.ask(QUESTION)
    await reef.report({"score": 1.0, "references": [receipt]})
    await steps_reach(reef, 1)
    feedback_only = await reef.report({"feedback": "no number", "references": [receipt]})
    await eventually(reef.training, 60, "the feedback to be judged", satisfied=lambda s: s.get("ineligible"))
    console = Console(width=200, record=True)
    console.print(record_view(await reef.record(receipt)))
    shown = console.export_text()
    assert "trained on in step 1" in shown
    assert "not trained on: the report has no score" in shown
    console.print(record_view(await reef.record(feedback_only)))
    assert "not trained on: the report has no score" in console.export_text()


async def test_a_restart_says_when_full_weights_lose_the_versions_after_their_last_checkpoint(
    start_weight_reef: StartWeightReef, caplog: pytest.LogCaptureFixture
) -> None:
    settings = {"training__adapter": "full", "training__checkpoint_every": "10"}
    reef = await start_weight_reef(**settings)
    receipt, _record = await reef.ask(QUESTION, temperature=1.0, seed=3)
    await reef.report({"score": 1.0, "references": [receipt]})
    trained = await steps_reach(reef, 1)
    assert trained["last_step"]["version"] == "v1"
    await reef.server.close()

    await start_weight_reef(**settings)
    assert (
        "toy resumes from its last checkpoint" in caplog.text
        and "up to v1, were not checkpointed (training.checkpoint-every 10)" in caplog.text
    ), caplog.text
