"""An SAO deployment trains on scores no person gave: a scripted user's next message corrects the embedded model's
answer, the next-turn judge (the scripted judge endpoint) reports it, and SAO takes a step on that report."""

from __future__ import annotations

from typing import Any

from tests.support.app_servers import AppServers, url_of
from tests.support.fake_judge import FakeJudge
from tests.support.waiting import eventually
from tests.support.weight_testing import SCENARIO, StartWeightReef

QUESTION = "Which file handles the login?"


async def test_sao_trains_on_a_next_turn_report(start_weight_reef: StartWeightReef, app_servers: AppServers) -> None:
    judge = await app_servers.serve(FakeJudge().app())
    reef = await start_weight_reef(reports__next_turn="on", reports__judge_url=url_of(judge))
    headers = {"x-reef-scenario": SCENARIO, "x-reef-tag-session": "sao-session"}
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    first = await reef.client.post("/v1/chat/completions", headers=headers,
                                   json={"model": "smollm2", "messages": messages, "max_tokens": 8})  # fmt: skip
    assert first.status_code == 200, first.text
    receipt = first.headers["x-reef-agent-record-id"]
    messages += [first.json()["choices"][0]["message"], {"role": "user", "content": "No, which file? Name it."}]
    second = await reef.client.post("/v1/chat/completions", headers=headers,
                                    json={"model": "smollm2", "messages": messages, "max_tokens": 8})  # fmt: skip
    assert second.status_code == 200, second.text

    state = await eventually(
        reef.training, 180, "a step on the next-turn report", satisfied=lambda s: s.get("steps", 0) >= 1
    )
    assert state["last_step"]["metrics"]["mean_reward"] == 0.2  # corrected, on the 0..1 scale
    record = await reef.record(receipt)
    (report,) = record["reports"]
    assert report["source"] == "next-turn" and report["consumed_by_step"] == 1
