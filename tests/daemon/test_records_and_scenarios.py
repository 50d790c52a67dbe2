"""Records (paging, filters, detail), report idempotency, scenarios, status."""

from __future__ import annotations

from typing import Any

import pytest

from reef_contract import NEW_SCENARIO_HEADER, awaits_score
from tests.support.reef_testing import CHAT, Reef


async def infer(reef: Reef, scenario: str = "demo") -> str:
    response = await reef.post("/v1/chat/completions", CHAT, scenario=scenario)
    assert response.status == 200
    return response.headers["x-reef-agent-record-id"]


async def page(reef: Reef, **query: Any) -> dict[str, Any]:
    response = await reef.get("/reef/records", params={k: str(v) for k, v in query.items()})
    assert response.status == 200, await response.text()
    body: dict[str, Any] = await response.json()
    return body


async def test_paging_backward_and_forward(reef: Reef) -> None:
    receipts = [await infer(reef) for _ in range(7)]
    newest = await page(reef, limit=3)
    assert [r["id"] for r in newest["records"]] == receipts[::-1][:3]
    older = await page(reef, limit=3, before=newest["next_before"])
    assert [r["id"] for r in older["records"]] == receipts[::-1][3:6]
    oldest = await page(reef, limit=3, before=older["next_before"])
    assert [r["id"] for r in oldest["records"]] == receipts[:1]
    assert oldest["next_before"] is None

    forward = await page(reef, limit=4, after=0)
    assert [r["id"] for r in forward["records"]] == receipts[:4]
    rest = await page(reef, limit=4, after=forward["next_after"])
    assert [r["id"] for r in rest["records"]] == receipts[4:]
    nothing_new = await page(reef, after=rest["next_after"])
    assert nothing_new["records"] == [] and nothing_new["next_after"] == rest["next_after"]


async def test_filters_by_scenario_type_and_unscored(reef: Reef) -> None:
    a1, a2 = await infer(reef, "alpha"), await infer(reef, "alpha")
    b1 = await infer(reef, "beta")
    await reef.post("/reef/report", {"score": 1, "references": [a1]}, scenario="alpha")
    assert {r["id"] for r in (await page(reef, scenario="alpha"))["records"]} >= {a1, a2}
    assert [r["id"] for r in (await page(reef, scenario="beta"))["records"]] == [b1]
    assert [r["type"] for r in (await page(reef, type="report"))["records"]] == ["report"]
    assert {r["id"] for r in (await page(reef, unscored="true"))["records"]} == {a2, b1}
    assert [r["id"] for r in (await page(reef, unscored="true", scenario="alpha"))["records"]] == [a2]
    rows = {r["id"]: r for r in (await page(reef))["records"]}
    assert rows[a1]["score"] == 1.0 and rows[a2]["score"] is None


async def test_bad_queries(reef: Reef) -> None:
    for query in (
        {"limit": "0"},
        {"limit": "501"},
        {"type": "bogus"},
        {"after": "x"},
        {"after": 1, "before": 2},
        {"scenario": "../x"},
    ):
        response = await reef.get("/reef/records", params={k: str(v) for k, v in query.items()})
        assert response.status == 400, query
        assert (await response.json())["error"]["message"]


async def test_unknown_record_is_a_json_404(reef: Reef) -> None:
    response = await reef.get("/reef/records/" + "f" * 32)
    assert response.status == 404
    assert (await response.json())["error"]["type"] == "unknown_record"


async def test_latest_report_sets_the_score_and_show_lists_all(reef: Reef) -> None:
    receipt = await infer(reef)
    await reef.post("/reef/report", {"score": 0.2, "references": [receipt]})
    await reef.post("/reef/report", {"feedback": {"note": "no score"}, "references": [receipt]})
    await reef.post("/reef/report", {"score": 0.9, "references": [receipt]})
    record = await reef.record(receipt)
    assert record["score"] == 0.9
    assert [r.get("score") for r in record["reports"]] == [0.2, None, 0.9]
    assert record["reports"][1]["feedback"] == {"note": "no score"}


async def test_report_retry_is_idempotent_and_reuse_conflicts(reef: Reef) -> None:
    receipt = await infer(reef)
    body = {"score": 1, "references": [receipt], "agent_record_id": "ci-run-7:line-1"}
    first = await reef.post("/reef/report", body)
    second = await reef.post("/reef/report", body)
    assert first.status == second.status == 200
    assert (await first.json())["agent_record_id"] == (await second.json())["agent_record_id"] == "ci-run-7:line-1"
    assert len(await reef.records(type="report")) == 1

    conflict = await reef.post("/reef/report", {**body, "score": 0})
    assert conflict.status == 409
    assert (await conflict.json())["error"]["type"] == "record_conflict"
    assert (await reef.record(receipt))["score"] == 1.0


async def test_scenarios_lifecycle(reef: Reef) -> None:
    created = await reef.post("/reef/scenarios", {"name": "harness", "training_mode": "manual"}, scenario=None)
    assert created.status == 201
    assert (await created.json())["training_mode"] == "manual"
    again = await reef.post("/reef/scenarios", {"name": "harness"}, scenario=None)
    assert again.status == 200

    await infer(reef, "implicit")  # first sight creates it with the deployment's recipe
    listing = (await (await reef.get("/reef/scenarios")).json())["scenarios"]
    by_name = {row["scenario"]: row for row in listing}
    assert by_name["implicit"]["recipe"] == "record" and by_name["implicit"]["records"] == 1
    assert by_name["harness"]["records"] == 0

    updated = await reef.post("/reef/scenarios/harness/update", {"training_mode": "hybrid"}, scenario=None)
    assert (await updated.json())["training_mode"] == "hybrid"
    bad = await reef.post("/reef/scenarios/harness/update", {"training_mode": "sometimes"}, scenario=None)
    assert bad.status == 400 and "auto, manual, hybrid" in (await bad.json())["error"]["message"]
    missing = await reef.post("/reef/scenarios/nope/update", {"training_mode": "auto"}, scenario=None)
    assert missing.status == 404

    archived = await reef.session.delete(reef.url + "/reef/scenarios/implicit")
    assert archived.status == 200
    archived_as = (await archived.json())["archived_as"]
    names = {row["scenario"] for row in (await (await reef.get("/reef/scenarios")).json())["scenarios"]}
    assert "implicit" not in names
    assert len(await reef.records(scenario=archived_as)) == 1  # archived, never destroyed
    await infer(reef, "implicit")  # the name is free again, with a fresh history
    assert len(await reef.records(scenario="implicit")) == 1


async def test_a_request_that_makes_a_scenario_named_like_another_says_so(
    reef: Reef, caplog: pytest.LogCaptureFixture
) -> None:
    first = await reef.post("/v1/chat/completions", CHAT, scenario="checkout-flow")
    assert first.status == 200 and NEW_SCENARIO_HEADER not in first.headers  # the first scenario is like none
    typo = await reef.post("/v1/chat/completions", CHAT, scenario="chekout-flow")
    assert typo.status == 200  # answered all the same: the new scenario may be meant
    said = "made new scenario 'chekout-flow' (did you mean checkout-flow?)"
    assert typo.headers[NEW_SCENARIO_HEADER] == said
    assert said in caplog.text
    again = await reef.post("/v1/chat/completions", CHAT, scenario="chekout-flow")
    assert NEW_SCENARIO_HEADER not in again.headers  # said once, when it was made
    streamed = await reef.post("/v1/chat/completions", {**CHAT, "stream": True}, scenario="checkout-flows")
    assert streamed.headers[NEW_SCENARIO_HEADER].startswith("made new scenario 'checkout-flows'")
    await streamed.read()


async def test_an_archive_takes_no_new_records(reef: Reef) -> None:
    """Writing to an archived scenario's name, by the proxy or an import, is refused and does not revive it."""
    await infer(reef, "old")
    archived_as = (await (await reef.session.delete(reef.url + "/reef/scenarios/old")).json())["archived_as"]
    proxied = await reef.post("/v1/chat/completions", CHAT, scenario=archived_as)
    assert proxied.status == 409
    refused = (await proxied.json())["error"]
    assert refused["type"] == "archived_scenario" and "is the archive of scenario 'old'" in refused["message"]
    conversation = {"messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]}
    imported = await reef.post("/reef/records/batch", {"records": [conversation]}, scenario=archived_as)
    assert imported.status == 409 and (await imported.json())["error"]["type"] == "archived_scenario"
    created = await reef.post("/reef/scenarios", {"name": archived_as}, scenario=None)
    assert created.status == 409
    names = {row["scenario"] for row in (await (await reef.get("/reef/scenarios")).json())["scenarios"]}
    assert archived_as not in names and "old" not in names
    assert len(await reef.records(scenario=archived_as)) == 1


async def test_status(reef: Reef) -> None:
    await infer(reef)
    status = await (await reef.get("/reef/status")).json()
    assert status["recipe"]["name"] == "record"
    assert status["runtime"]["kind"] == "http"
    assert status["scenarios"]["demo"]["records"] == 1
    assert status["scenarios"]["demo"]["unscored"] == 1
    assert status["training"]["enabled"] is False
    assert status["auth"] is False


async def test_a_recipe_without_releases_lists_no_versions_whatever_the_tags_say(reef: Reef) -> None:
    tagged = await reef.post("/v1/chat/completions", CHAT, headers={"x-reef-tag-release": "made-up"})
    assert tagged.status == 200
    scores = await (await reef.get("/reef/scenarios/demo/versions/scores")).json()
    assert scores["versions"] == [] and scores["canary"] is None


async def test_a_token_count_is_not_waiting_for_a_score(reef: Reef) -> None:
    answered = await infer(reef, "counted")
    count = {"model": "m", "messages": [{"role": "user", "content": "how long is this?"}]}
    response = await reef.post("/v1/messages/count_tokens", count, scenario="counted")
    assert response.status == 200, await response.text()
    counted = response.headers["x-reef-agent-record-id"]
    unscored = (await page(reef, unscored="true", scenario="counted"))["records"]
    assert [row["id"] for row in unscored] == [answered]
    assert counted in {row["id"] for row in (await page(reef, scenario="counted"))["records"]}
    status = await (await reef.get("/reef/status")).json()
    assert status["scenarios"]["counted"]["unscored"] == 1
    assert awaits_score(next(row for row in (await page(reef))["records"] if row["id"] == counted)) is False
