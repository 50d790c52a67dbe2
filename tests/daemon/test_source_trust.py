"""Sources you can trust: each derived source's agreement with people's scores, per scenario; one that scores the
opposite of people's stops counting once it shares enough records with them (the record's score falls back to the
next source, or to none; recipes refuse its reports), with a `source` event that says why, until a person turns it
back on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reef_daemon.harness.tables.live_scores import LiveScoreReader
from reef_daemon.reports.agreement import kappa
from reef_daemon.store.engines.opening import open_engine
from reef_daemon.store.engines.reader import Reader
from reef_daemon.store.engines.schema import migrate
from tests.daemon.test_report_sources import add_record, add_score, derived, receipt, report
from tests.support import counting_recipe
from tests.support.reef_testing import Reef, StartReef
from tests.support.waiting import eventually

RECIPE = "tests.support.counting_recipe:CountingRecipe"
SHARED = 4  # reports.min-agreement-records in these tests


async def sources(reef: Reef) -> dict[str, Any]:
    status: dict[str, Any] = await (await reef.get("/reef/status")).json()
    return dict(status["sources"].get("demo", {}))


async def training(reef: Reef) -> dict[str, Any]:
    status: dict[str, Any] = await (await reef.get("/reef/status")).json()
    return dict(status["training"]["scenarios"].get("demo", {}))


async def scored(reef: Reef, record_id: str) -> tuple[float | None, str | None]:
    shown = await reef.record(record_id)
    return shown["score"], shown["source"]


async def a_wrong_judge(reef: Reef, shared: int = SHARED) -> None:
    """The judge scores `shared` records the opposite of a person's: high where the person says low."""
    for n in range(shared):
        record_id = await receipt(reef)
        person = 1.0 if n % 2 else 0.0
        await report(reef, derived(record_id, "judge", 1.0 - person))
        await report(reef, {"score": person, "references": [record_id]})


async def test_a_source_that_agrees_with_people_keeps_counting_and_status_shows_its_agreement(
    start_reef: StartReef,
) -> None:
    reef = await start_reef(reports__min_agreement_records=SHARED)
    for n in range(SHARED):
        record_id = await receipt(reef)
        await report(reef, derived(record_id, "outcome", 0.9 if n % 2 else 0.1))
        await report(reef, {"score": 0.8 if n % 2 else 0.3, "references": [record_id]})
    assert await sources(reef) == {"outcome": {"shared": SHARED, "kappa": 1.0, "counts": True, "reason": None}}


async def test_a_source_scoring_against_people_stops_counting_until_a_person_turns_it_back_on(
    start_reef: StartReef,
) -> None:
    counting_recipe.STEPS_TAKEN.clear()
    reef = await start_reef(recipe=RECIPE, reports__min_agreement_records=SHARED)
    both, alone = await receipt(reef), await receipt(reef)
    await report(reef, derived(both, "judge", 0.1))
    await report(reef, derived(both, "next-turn", 0.8))
    await report(reef, derived(alone, "judge", 0.3))
    await a_wrong_judge(reef, SHARED - 2)
    assert (await sources(reef))["judge"] == {"shared": SHARED - 2, "kappa": -1.0, "counts": True, "reason": None}
    assert await scored(reef, both) == (0.1, "judge")  # not yet enough shared records to judge it

    await a_wrong_judge(reef, 2)
    judge = (await sources(reef))["judge"]
    assert (judge["shared"], judge["kappa"], judge["counts"]) == (SHARED, -1.0, False)
    assert "κ -1.00 on 4 shared records, below reports.min-agreement 0.2" in judge["reason"]
    events = [e for e in await reef.daemon.store.events.after(0, "demo") if e.type == "source"]
    assert [(e.data["action"], e.data["source"]) for e in events] == [("distrusted", "judge")]  # type: ignore[index]
    assert events[0].data["reason"] == judge["reason"]  # type: ignore[index]
    assert await scored(reef, both) == (0.8, "next-turn")  # the next source in precedence
    assert await scored(reef, alone) == (None, None)  # no other source: unscored

    late = await report(reef, derived(await receipt(reef), "judge", 0.9))
    reason = "reports from judge no longer count in this scenario: " + judge["reason"]
    refused = await eventually(
        lambda: training(reef), 60, "the judge's report refused", satisfied=lambda s: reason in s.get("ineligible", {})
    )
    assert refused["ineligible"][reason] >= 1  # the late one; judge reports the worker reached after the switch too

    enabled = await reef.post("/reef/scenarios/demo/sources/judge/enable", {})
    assert enabled.status == 200, await enabled.text()
    agreement = (await enabled.json())["agreement"]
    assert agreement == {"shared": SHARED, "kappa": -1.0, "counts": True, "reason": "a person turned it back on"}
    assert await scored(reef, both) == (0.1, "judge") and await scored(reef, alone) == (0.3, "judge")
    await a_wrong_judge(reef, 2)  # never switched off again by itself
    assert (await sources(reef))["judge"]["counts"] is True
    events = [e for e in await reef.daemon.store.events.after(0, "demo") if e.type == "source"]
    assert [e.data["action"] for e in events] == ["distrusted", "enabled"]  # type: ignore[index]

    counted = await report(reef, derived(await receipt(reef), "judge", 0.9))
    await report(reef, {"score": 1.0, "references": [await receipt(reef)]})
    await eventually(
        lambda: training(reef),
        60,
        "a step on the judge's report",
        satisfied=lambda s: any(counted["agent_record_id"] in step for step in counting_recipe.STEPS_TAKEN),
    )
    assert all(late["agent_record_id"] not in step for step in counting_recipe.STEPS_TAKEN)


async def test_enabling_names_a_derived_source(start_reef: StartReef) -> None:
    reef = await start_reef()
    await receipt(reef)
    for source in ("person", "gossip"):
        refused = await reef.post(f"/reef/scenarios/demo/sources/{source}/enable", {})
        assert refused.status == 400
        assert (
            "name one of words, retry, interruption, tool-error, tests, next-turn, judge, outcome, import"
            in (await refused.json())["error"]["message"]
        )


async def test_live_scores_of_chosen_sources_leave_out_a_distrusted_one(tmp_path: Path, store_url: str | None) -> None:
    engine = open_engine(store_url, tmp_path)
    conn = engine.connect()
    migrate(conn, engine)
    add_record(conn, 1, "a", 0.3, "judge")
    add_score(conn, 1, "judge", 0.3)
    add_score(conn, 1, "next-turn", 0.9)
    conn.execute(
        "INSERT INTO source_trust (scenario, source, distrusted, reason, changed_at) VALUES (?,?,?,?,?)",
        ("demo", "judge", 1, "its agreement with people's scores fell", 1.0),
    )
    reader = Reader(engine)
    (derived_only,) = await LiveScoreReader(reader).tallies("demo", ["a"], 0.5, 2, ("judge", "next-turn"))
    reader.close()
    conn.close()
    assert (derived_only.scored, derived_only.total) == pytest.approx((1, 0.9))


def test_agreement_is_corrected_for_chance() -> None:
    people = [True] * 16 + [False] * 4
    always_high = kappa([(person, True) for person in people])
    assert always_high == (20, 0.0)  # right 80 % of the time, as calling everything high would be by chance
    assert kappa([(person, person) for person in people]) == (20, 1.0)
    assert kappa([(person, not person) for person in people]).kappa == pytest.approx(-0.4706, abs=1e-4)
    assert kappa([(True, True)] * 5) == (5, None) and kappa([]) == (0, None)  # undefined: nothing to tell apart
