"""SAO on reports no person gave (a judge's, the user's next turn): every turn of a conversation trains though
turn k+1 is generated before turn k's report exists; a person's later report on a rollout a derived one trained
trains as a correction; a rollout not sampled at temperature 1, top-p 1 is refused with its reason."""

from __future__ import annotations

from typing import Any, cast

from rich.console import Console

from recipes.sao.rollout import Staleness, judge_report
from reef_cli.render.status import status_view
from reef_contract import StoredRecord
from reef_daemon.recipe_api import Ineligible, ReferencedRecord, Unit
from tests.sao.test_sao_recipe import QUESTION, policy_logprob, rollout_of, steps_reach
from tests.support.waiting import eventually
from tests.support.weight_testing import SCENARIO, StartWeightReef, WeightReef

NEXT_MESSAGES = ("No, name one colour.", "Thanks. And at night?", "No, one word.", "Great, next task.")
# The reports here are posted by the test; the daemon's own signals (the user's words, a retry) would score the
# same answers first.
NO_SIGNALS = {f"reports__{signal}": "off" for signal in ("words", "retry", "interruption", "tool_error", "tests")}


async def answer(reef: WeightReef, messages: list[dict[str, Any]], **sampling: Any) -> str:
    """The next assistant turn of the conversation (appended to it); returns its receipt."""
    body = {"model": "smollm2", "messages": messages, "max_tokens": 6, **sampling}
    headers = {"x-reef-scenario": SCENARIO, "x-reef-tag-session": "five-turns"}
    response = await reef.client.post("/v1/chat/completions", json=body, headers=headers)
    assert response.status_code == 200, response.text
    messages.append(response.json()["choices"][0]["message"])
    return str(response.headers["x-reef-agent-record-id"])


def next_turn_report(receipt: str, next_record: str, next_message: str, score: float) -> dict[str, Any]:
    """A next-turn report as the judge makes one: the verdict read from the turn after the answer."""
    verdict = "accepted" if score else "corrected"
    evidence = {"verdict": verdict, "next_record": next_record, "next_message": next_message}
    return {"score": score, "feedback": f"the user {verdict} it", "references": [receipt], "source": "next-turn",
            "evidence": evidence}  # fmt: skip


async def test_every_turn_of_a_conversation_trains_on_its_next_turn_report(
    start_weight_reef: StartWeightReef,
) -> None:
    """Turn k+1 is answered before turn k's report can exist, so once turn k trains, turn k+1's rollout is a
    version old: with max-staleness 0 it trains all the same (derived-staleness)."""
    reef = await start_weight_reef(**NO_SIGNALS)
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    turns = [await answer(reef, messages)]
    for number, said in enumerate(NEXT_MESSAGES, start=1):
        messages.append({"role": "user", "content": said})
        turns.append(await answer(reef, messages))
        score = 0.0 if said.startswith("No") else 1.0
        await reef.report(next_turn_report(turns[-2], turns[-1], said, score))
        state = await eventually(
            reef.training,
            180,
            f"the report on turn {number} to be trained on or refused",
            satisfied=lambda s, n=number: (
                s.get("steps", 0) + sum(s.get("ineligible", {}).values()) >= n and s["running_since"] is None
            ),
        )
        assert state["ineligible"] == {}, f"turn {number}: {state['ineligible']}"
    assert state["steps"] == len(NEXT_MESSAGES)
    for receipt in turns[:-1]:
        (report,) = (await reef.record(receipt))["reports"]
        assert report["consumed_by_step"] is not None


async def test_a_persons_later_report_trains_as_a_correction_of_a_derived_one(
    start_weight_reef: StartWeightReef,
) -> None:
    reef = await start_weight_reef()
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    receipt = await answer(reef, messages)
    rollout = rollout_of(reef, await reef.record(receipt))
    await reef.report({"score": 0.0, "references": [receipt], "source": "judge", "feedback": "off topic"})
    await steps_reach(reef, 1)
    after_judge = policy_logprob(reef, rollout)

    await reef.report({"score": 1.0, "references": [receipt]})  # a person disagrees, after the judge trained
    state = await steps_reach(reef, 2)
    assert state["ineligible"] == {}
    metrics = state["last_step"]["metrics"]
    assert metrics["policy_updated"] is True and metrics["corrections"] == 1 and metrics["mean_reward"] == 1.0
    assert policy_logprob(reef, rollout) > after_judge  # the person's score moved the weights its way

    await reef.report({"score": 1.0, "references": [receipt]})  # a correction is trained once
    state = await eventually(reef.training, 60, "the repeat to be refused", satisfied=lambda s: s.get("ineligible"))
    assert state["steps"] == 2 and state["ineligible"] == {"the rollout was already trained on": 1}


async def test_a_persons_report_supersedes_a_derived_one_still_waiting_for_its_batch(
    start_weight_reef: StartWeightReef,
) -> None:
    reef = await start_weight_reef(training__batch_size="2", **NO_SIGNALS)
    first, _ = await reef.ask(QUESTION)
    second, _ = await reef.ask(QUESTION)
    await reef.report({"score": 0.0, "references": [first], "source": "judge", "feedback": "off topic"})
    await eventually(reef.training, 60, "the judge's report waiting for its batch",
                     satisfied=lambda state: state.get("waiting_units") == 1)  # fmt: skip
    await reef.report({"score": 1.0, "references": [first]})  # a person disagrees while the judge's waits
    await reef.report({"score": 0.0, "references": [second], "source": "judge", "feedback": "off topic"})
    state = await steps_reach(reef, 1)
    assert state["ineligible"] == {} and state["last_step"]["metrics"]["mean_reward"] == 1.0  # the person's only
    await eventually(reef.training, 60, "the judge's report on the second answer waiting for the next batch",
                     satisfied=lambda later: later.get("waiting_units") == 1)  # fmt: skip
    reports = {report["source"]: report for report in (await reef.record(first))["reports"]}
    assert reports["person"]["consumed_by_step"] == reports["judge"]["consumed_by_step"] == 1


async def test_a_rollout_not_sampled_at_temperature_1_top_p_1_is_refused_with_its_reason(
    start_weight_reef: StartWeightReef,
) -> None:
    reef = await start_weight_reef()
    greedy, _ = await reef.ask(QUESTION, temperature=0)
    nucleus, _ = await reef.ask(QUESTION, temperature=1, top_p=0.9)
    cooled, _ = await reef.ask(QUESTION, temperature=0.7)
    for receipt in (greedy, nucleus, cooled):
        await reef.report({"score": 1.0, "references": [receipt]})
    state = await eventually(
        reef.training, 60, "three refusals", satisfied=lambda s: sum(s.get("ineligible", {}).values()) == 3
    )
    advice = "not at temperature 1, top-p 1: it would train off-policy (ask with temperature 1 and top_p 1)"
    assert state["steps"] == 0 and state["ineligible"] == {
        f"the rollout was sampled greedily (temperature 0), {advice}": 1,
        f"the rollout was sampled at temperature 1, top-p 0.9, {advice}": 1,
        f"the rollout was sampled at temperature 0.7, top-p 1, {advice}": 1,
    }
    status = (await reef.client.get("/reef/status")).json()
    console = Console(record=True, width=200)
    console.print(status_view(status, "http://reef"))
    shown = " ".join(console.export_text().split())  # the reasons wrap
    assert f"not trained toy: the rollout was sampled at temperature 0.7, top-p 1, {advice} (1);" in shown
    assert f"the rollout was sampled greedily (temperature 0), {advice} (1)" in shown


async def test_defaults_set_off_policy_by_hand_are_named_in_status_and_their_rollouts_refused(
    start_weight_reef: StartWeightReef,
) -> None:
    reef = await start_weight_reef(inference__temperature="0.7")
    receipt, _ = await reef.ask(QUESTION)  # sets no sampling: gets the hand-set default
    await reef.report({"score": 1.0, "references": [receipt]})
    state = await eventually(reef.training, 60, "the refusal", satisfied=lambda s: s.get("ineligible"))
    assert list(state["ineligible"]) == [
        "the rollout was sampled at temperature 0.7, top-p 1, not at temperature 1, top-p 1: it would train"
        " off-policy (ask with temperature 1 and top_p 1)"
    ]
    console = Console(record=True, width=200)
    console.print(status_view((await reef.client.get("/reef/status")).json(), "http://reef"))
    shown = " ".join(console.export_text().split())
    assert (
        "sao trains only rollouts sampled at temperature 1, top-p 1; these were set by hand, so an answer to a"
        " request that sets no sampling is not trained on" in shown
    )


def test_a_rollout_whose_sampling_cannot_be_read_is_refused_saying_so() -> None:
    record = {
        "id": "r1", "complete": True, "consumed_by_step": None, "created_at": 1e12, "request": {"temperature": "hot"},
        "tokens": {"prompt_ids": [1, 2], "output_ids": [3, 4], "logprobs": [-1.0, -1.0], "versions": ["w:0"]},
    }  # fmt: skip
    unit = Unit(cast(StoredRecord, {"id": "p1", "score": 1.0}), (cast(ReferencedRecord, record),))
    verdict, rollout = judge_report(unit, "w:0", Staleness(0, 4), set())
    assert rollout is None and verdict == Ineligible("the rollout's sampling (temperature, top_p) cannot be read")


async def test_an_outcome_report_never_trains_weights_and_status_says_what_it_feeds(
    start_weight_reef: StartWeightReef,
) -> None:
    """An outcome arrives days after its session, by weights long replaced: even on a fresh rollout it is refused,
    with the reason, and `reef status` says what outcome reports feed instead."""
    reef = await start_weight_reef(**NO_SIGNALS)
    receipt, _ = await reef.ask(QUESTION, temperature=1, top_p=1)
    evidence = {"session": "s1", "decision": "kept"}
    await reef.report({"score": 1.0, "references": [receipt], "source": "outcome", "evidence": evidence})
    state = await eventually(reef.training, 60, "the refusal", satisfied=lambda s: s.get("ineligible"))
    reason = "outcome reports feed live scores, replays and the harness; weights do not train on them"
    assert state["steps"] == 0 and state["ineligible"] == {reason: 1}
    console = Console(record=True, width=200)
    console.print(status_view((await reef.client.get("/reef/status")).json(), "http://reef"))
    assert f"outcomes {reason}" in " ".join(console.export_text().split())
