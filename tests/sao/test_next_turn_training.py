"""An SAO deployment trains on scores no person gave: a scripted user's next message corrects the embedded model's
answer, the next-turn judge (the scripted judge endpoint) reports it, and SAO takes a step on that report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reef_contract import JUDGE_SCENARIO
from tests.support.app_servers import AppServers, url_of
from tests.support.fake_judge import FakeJudge
from tests.support.waiting import eventually
from tests.support.weight_testing import SCENARIO, StartWeightReef

QUESTION = "Which file handles the login?"


async def test_sao_trains_on_a_next_turn_report(start_weight_reef: StartWeightReef, app_servers: AppServers) -> None:
    judge = await app_servers.serve(FakeJudge().app())
    reef = await start_weight_reef(reports__words="off", reports__next_turn="on", reports__judge_url=url_of(judge))
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
    assert state["last_step"]["metrics"]["mean_reward"] == 0.0  # corrected: the bottom of the 0..1 scale
    record = await reef.record(receipt)
    (report,) = record["reports"]
    assert report["source"] == "next-turn" and report["consumed_by_step"] == 1


async def test_the_embedded_model_judges_when_no_judge_endpoint_is_set(start_weight_reef: StartWeightReef) -> None:
    reef = await start_weight_reef(reports__words="off", reports__next_turn="on", reports__judge_max_tokens="16")
    headers = {"x-reef-scenario": SCENARIO, "x-reef-tag-session": "embedded-judge"}
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    first = await reef.client.post("/v1/chat/completions", headers=headers,
                                   json={"model": "smollm2", "messages": messages, "max_tokens": 8})  # fmt: skip
    messages += [first.json()["choices"][0]["message"], {"role": "user", "content": "Thanks, next task."}]
    await reef.client.post("/v1/chat/completions", headers=headers,
                           json={"model": "smollm2", "messages": messages, "max_tokens": 8})  # fmt: skip

    async def judge_calls() -> list[dict[str, Any]]:
        page = (await reef.client.get("/reef/records", params={"scenario": JUDGE_SCENARIO})).json()
        return list(page["records"])

    (call,) = await eventually(judge_calls, 180, "the embedded model's judge call to be recorded")
    assert call["status"] == 200 and call["usage"]["output_tokens"]
    judge = reef.daemon.next_turn
    assert judge is not None
    await eventually(lambda: _settled(judge.counts.judged + judge.counts.no_judgment), 60, "the verdict read")
    # A verdict from the tiny model is a report like any other; prose from it is no report.
    reports = (await reef.record(first.headers["x-reef-agent-record-id"]))["reports"]
    assert len(reports) == judge.counts.judged and all(r["source"] == "next-turn" for r in reports)


async def _settled(count: int) -> bool:
    return count >= 1


@pytest.mark.parametrize("trains", [("--training.adapter", "full"), ("--training.trainer", "slime")])
def test_reef_serve_refuses_a_policy_that_would_judge_itself(tmp_path: Path, trains: tuple[str, str]) -> None:
    command = [sys.executable, "-m", "reef_cli", "serve", "--reef.port", "0", "--reef.state-dir", str(tmp_path / "s")]
    args = ["--recipe", "sao", *trains, "--reports.next-turn", "on"]
    result = subprocess.run([*command, *args], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "the very policy this deployment trains" in result.stderr and "--reports.judge-url" in result.stderr
