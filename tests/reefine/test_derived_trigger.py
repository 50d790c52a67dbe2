"""A low score no person gave (the user's next turn read by a judge) publishes a harness change only on evidence:
a protected task that ran, or a replay the candidate answered better. One misread verdict with nothing to check
the candidate against is refused, whether the gate ran or could not run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.fake_proposer_model import prefers, skill
from tests.support.reefine_testing import SCENARIO, Reefine, StartReefine
from tests.support.waiting import eventually


async def derived_low_score(reefine: Reefine, opening: str) -> str:
    """A conversation opening with `opening`, scored low by a next-turn report; returns its receipt."""
    chat = {"model": "fake-proposer", "messages": [{"role": "user", "content": opening}]}
    async with reefine.session.post(reefine.url + "/v1/chat/completions", json=chat, headers=reefine.headers()) as sent:
        receipt = sent.headers["x-reef-agent-record-id"]
    evidence = {"verdict": "corrected", "next_record": "next-turn-receipt", "next_message": "No, that is wrong."}
    report = {"score": 0.0, "feedback": "the user corrected it", "references": [receipt], "source": "next-turn",
              "evidence": evidence}  # fmt: skip
    await reefine.ok("POST", "/reef/report", report)
    return receipt


async def settled_step(reefine: Reefine) -> dict[str, Any]:
    """The scenario's newest step, once the failure-driven one is committed."""
    rows = await eventually(
        reefine.releases,
        60,
        "the failure-driven step",
        satisfied=lambda rows: any(r["operation"] == "training" for r in rows),
    )
    return next(row for row in rows if row["operation"] == "training")


async def hybrid(reefine: Reefine) -> None:
    await reefine.ok("POST", f"/reef/scenarios/{SCENARIO}/update", {"training_mode": "hybrid"})
    reefine.model.script("failure-skill", json.dumps(skill("answer-fully", "# Answer fully\nGive the reason too.")))


async def test_a_derived_low_score_with_no_evaluation_publishes_nothing(reefine: Reefine) -> None:
    await hybrid(reefine)
    await derived_low_score(reefine, "capital of France?")
    step = await settled_step(reefine)
    assert (step["result"], step["version"]) == ("rejected", None), step
    reason = step["metrics"]["reason"]
    assert reason.startswith("the evaluation gate rejected it: not evaluated: ")
    assert "a next-turn report triggered it, and no person saw the failure" in reason
    assert (await reefine.ok("GET", "/reef/harness"))["version"] == "v0"


async def test_a_derived_low_score_whose_only_replay_is_no_better_publishes_nothing(
    start_reefine: StartReefine, scripted_pi: Path
) -> None:
    reefine = await start_reefine(harness__trial=str(scripted_pi))
    await hybrid(reefine)
    await derived_low_score(reefine, "What is two plus two?")  # its own conversation is the one replay
    step = await settled_step(reefine)
    assert (step["result"], step["version"]) == ("rejected", None), step
    evidence = step["metrics"]["evidence"]
    assert evidence["ran"] and not evidence["passed"]
    assert evidence["reason"].startswith("no protected task, 1 replay(s) run, none better; a next-turn report")
    assert (await reefine.ok("GET", "/reef/harness"))["version"] == "v0"


async def test_a_derived_low_score_whose_replay_comes_out_better_is_published(
    start_reefine: StartReefine, scripted_pi: Path
) -> None:
    reefine = await start_reefine(harness__trial=str(scripted_pi))
    await hybrid(reefine)
    reefine.model.script("judge", prefers("B", "it gives the reason"), prefers("A", "it gives the reason"))
    await derived_low_score(reefine, "What is two plus two?")
    step = await settled_step(reefine)
    assert (step["result"], step["version"]) == ("selected", "v1"), step
    assert "1 task(s) better; 1 replay(s) run" in step["metrics"]["evidence"]["reason"]
