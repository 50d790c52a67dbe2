"""The recipe worker: eligible units are batched into steps, each consumed once; ineligible ones say why;
a restart resumes without training anything twice."""

from __future__ import annotations

from typing import Any

from tests.support import counting_recipe
from tests.support.reef_testing import CHAT, Reef, StartReef
from tests.support.waiting import eventually

RECIPE = "tests.support.counting_recipe:CountingRecipe"


async def receipt(reef: Reef) -> str:
    response = await reef.post("/v1/chat/completions", CHAT)
    return response.headers["x-reef-agent-record-id"]


async def report(reef: Reef, body: dict[str, Any]) -> None:
    response = await reef.post("/reef/report", body)
    assert response.status == 200, await response.text()


async def training(reef: Reef) -> dict[str, Any]:
    status: dict[str, Any] = await (await reef.get("/reef/status")).json()
    return dict(status["training"]["scenarios"].get("demo", {}))


async def test_batches_steps_and_ineligible_reasons(start_reef: StartReef) -> None:
    counting_recipe.STEPS_TAKEN.clear()
    reef = await start_reef(recipe=RECIPE)
    first, second, third = await receipt(reef), await receipt(reef), await receipt(reef)
    await report(reef, {"feedback": "no score here", "references": [first]})
    await report(reef, {"score": 1, "references": [first, second]})
    await report(reef, {"score": 1, "references": [first]})
    state = await eventually(
        lambda: training(reef),
        60,
        "one unit waiting for a step and the two refusals stored",
        # A unit waits as soon as it is judged; the refusals judged beside it are stored a moment later.
        satisfied=lambda s: s.get("waiting_units") == 1 and sum(s.get("ineligible", {}).values()) == 2,
    )
    assert state["steps"] == 0
    assert state["ineligible"] == {"the report has no score": 1, "the report must reference exactly one receipt": 1}

    await report(reef, {"score": 0, "references": [second]})
    state = await eventually(lambda: training(reef), 60, "one step", satisfied=lambda s: s.get("steps") == 1)
    assert state["last_step"]["metrics"]["mean_reward"] == 0.5
    assert state["waiting_units"] == 0
    assert len(counting_recipe.STEPS_TAKEN) == 1

    releases = await (await reef.get("/reef/scenarios/demo/releases")).json()
    (row,) = releases["releases"]
    assert row["version"] == "v1" and row["result"] == "selected" and row["release_id"] == "weights-1"
    assert row["consumed"] == counting_recipe.STEPS_TAKEN[0]

    await report(reef, {"score": 1, "references": [third]})  # one waiting unit left over
    await eventually(
        lambda: training(reef),
        60,
        "one unit waiting for a step and the two refusals stored",
        # A unit waits as soon as it is judged; the refusals judged beside it are stored a moment later.
        satisfied=lambda s: s.get("waiting_units") == 1 and sum(s.get("ineligible", {}).values()) == 2,
    )


async def test_restart_resumes_without_training_twice(start_reef: StartReef) -> None:
    counting_recipe.STEPS_TAKEN.clear()
    reef = await start_reef(recipe=RECIPE)
    receipts = [await receipt(reef) for _ in range(3)]
    for number in receipts:
        await report(reef, {"score": 1, "references": [number]})
    await eventually(
        lambda: training(reef),
        60,
        "one step and one unit waiting",
        satisfied=lambda s: s.get("steps") == 1 and s.get("waiting_units") == 1,
    )
    await reef.server.close()

    again = await start_reef(recipe=RECIPE)  # same state directory
    await report(again, {"score": 0, "references": [receipts[0]]})  # a retrained-looking report of the same receipt
    state = await eventually(lambda: training(again), 60, "a second step", satisfied=lambda s: s.get("steps") == 2)
    consumed = [set(step) for step in counting_recipe.STEPS_TAKEN]
    assert len(consumed) == 2 and not consumed[0] & consumed[1]
    assert state["waiting_units"] == 0


async def test_a_failing_step_is_consumed_as_skipped(start_reef: StartReef) -> None:
    reef = await start_reef(recipe=RECIPE)
    for feedback in ("fine", "explode"):
        await report(reef, {"score": 1, "feedback": feedback, "references": [await receipt(reef)]})
    state = await eventually(lambda: training(reef), 60, "one step", satisfied=lambda s: s.get("steps") == 1)
    assert (state["last_step"]["result"], state["last_step"]["version"]) == ("skipped", None)
    assert "the step blew up" in state["last_step"]["metrics"]["error"]
    assert "the step blew up" in state["error"]
    status = await (await reef.get("/reef/status")).json()
    assert status["errors"] == ["demo: RuntimeError: the step blew up"]

    for _ in range(2):
        await report(reef, {"score": 1, "references": [await receipt(reef)]})
    state = await eventually(lambda: training(reef), 60, "a second step", satisfied=lambda s: s.get("steps") == 2)
    assert (state["last_step"]["step"], state["last_step"]["version"]) == (2, "v1")  # the skipped step took none


async def test_rollback_is_committed_as_a_step_of_its_own(start_reef: StartReef) -> None:
    reef = await start_reef(recipe=RECIPE)
    for _ in range(2):
        await report(reef, {"score": 1, "references": [await receipt(reef)]})
    await eventually(lambda: training(reef), 60, "one step", satisfied=lambda s: s.get("steps") == 1)
    response = await reef.post("/reef/scenarios/demo/rollback", {"release_id": "weights-x"}, scenario=None)
    assert response.status == 200, await response.text()
    step = await response.json()
    assert step["operation"] == "rollback" and step["version"] == "v2"
    assert step["release_id"] == "weights-x-restored" and step["metrics"]["target_release_id"] == "weights-x"
    unsupported = await reef.post("/reef/scenarios/demo/promote", {"release_id": "weights-x"}, scenario=None)
    assert unsupported.status == 501
    history = (await (await reef.get("/reef/scenarios/demo/releases")).json())["releases"]
    assert [row["operation"] for row in history] == ["rollback", "training"]


async def test_record_recipe_has_no_releases_to_change(reef: Reef) -> None:
    await receipt(reef)
    response = await reef.post("/reef/scenarios/demo/rollback", {"release_id": "x"}, scenario=None)
    assert response.status == 501


async def test_a_recipe_without_a_harness_has_no_harness_routes(start_reef: StartReef) -> None:
    reef = await start_reef(recipe=RECIPE)
    for method, path in (("GET", "/reef/harness"), ("GET", "/reef/requests/x"), ("POST", "/reef/train")):
        response = await reef.session.request(method, reef.url + path, json={"text": "hi"}, headers=reef.headers())
        assert response.status == 501, path
        error = (await response.json())["error"]
        assert error["type"] == "no_harness" and "the counting recipe does not evolve a harness" in error["message"]
    adapters = (await (await reef.get("/reef/harness/adapters")).json())["adapters"]
    assert adapters and not any(row["serving"] for row in adapters)


async def test_the_recipe_is_lent_one_context_its_url_set_once_the_daemon_listens(start_reef: StartReef) -> None:
    counting_recipe.LENT.clear()
    reef = await start_reef(recipe=RECIPE, reef__tokens='["daemon-token"]')
    ((when, context),) = counting_recipe.LENT
    assert when == "start" and context.url is None
    assert context.runtime is reef.daemon.runtime and context.settings is reef.daemon.settings

    url = reef.daemon.listening(reef.server.port or 0)
    assert counting_recipe.LENT[1] == ("listening", context)
    assert context.url == url
    with context.gate.lend("demo") as token:
        response = await reef.post("/v1/chat/completions", CHAT, headers={"authorization": f"Bearer {token}"})
        assert response.status == 200, await response.text()
    assert [scenario.name for scenario in context.store.scenarios.all()] == ["demo"]
