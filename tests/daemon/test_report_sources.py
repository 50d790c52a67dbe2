"""Reports carry their source: a person's, or one derived with no person (the next turn, a judge, the code's
outcome, an import). A person's report wins over a derived one for the same record, in the record's score, in the
recipes and in live scores; a derived report is one per record per source, clamped to the scale; `reports.sources`
chooses what counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reef_daemon.harness.tables.live_scores import LiveScoreReader
from reef_daemon.store.engines import schema
from reef_daemon.store.engines.engine import Connection
from reef_daemon.store.engines.opening import open_engine
from reef_daemon.store.engines.reader import Reader
from reef_daemon.store.engines.schema import MIGRATIONS, migrate
from tests.support import counting_recipe
from tests.support.reef_testing import CHAT, Reef, StartReef
from tests.support.waiting import eventually

RECIPE = "tests.support.counting_recipe:CountingRecipe"


async def receipt(reef: Reef) -> str:
    response = await reef.post("/v1/chat/completions", CHAT)
    return response.headers["x-reef-agent-record-id"]


async def report(reef: Reef, body: dict[str, Any], status: int = 200) -> dict[str, Any]:
    response = await reef.post("/reef/report", body)
    assert response.status == status, await response.text()
    answer: dict[str, Any] = await response.json()
    return answer


def derived(record_id: str, source: str = "next-turn", score: float = 0.2, **more: Any) -> dict[str, Any]:
    return {
        "score": score,
        "references": [record_id],
        "source": source,
        "feedback": "the user corrected it",
        "evidence": {"verdict": "corrected"},
        **more,
    }


async def test_a_person_wins_over_a_derived_report_and_every_view_says_where_a_score_came_from(
    start_reef: StartReef,
) -> None:
    reef = await start_reef()
    record_id = await receipt(reef)
    await report(reef, derived(record_id))
    shown = await reef.record(record_id)
    assert (shown["score"], shown["source"]) == (0.2, "next-turn")
    (first,) = shown["reports"]
    assert first["source"] == "next-turn" and first["evidence"] == {"verdict": "corrected"}

    await report(reef, {"score": 0.9, "references": [record_id]})
    await report(reef, derived(record_id, "judge", 0.1))  # a later derived score does not displace the person's
    shown = await reef.record(record_id)
    assert (shown["score"], shown["source"]) == (0.9, "person")
    assert [r["source"] for r in shown["reports"]] == ["next-turn", "person", "judge"]
    (row,) = [r for r in await reef.records(type="inference") if r["id"] == record_id]
    assert (row["score"], row["source"]) == (0.9, "person")


async def test_a_derived_report_is_one_per_record_and_source_and_stays_on_the_scale(start_reef: StartReef) -> None:
    reef = await start_reef()
    record_id, other = await receipt(reef), await receipt(reef)
    first = await report(reef, derived(record_id, "judge", 7.0))
    again = await report(reef, derived(record_id, "judge", 0.0, feedback="a second opinion"))
    assert first["created"] is True and again["created"] is False
    assert again["agent_record_id"] == first["agent_record_id"]
    shown = await reef.record(record_id)
    assert shown["score"] == 1.0  # clamped to the deployment's scale, 0 to 1
    assert len(shown["reports"]) == 1

    refused = await report(reef, derived(record_id, score=0.5, references=[record_id, other]), status=400)
    assert "exactly one record" in refused["error"]["message"]
    refused = await report(reef, {"score": 0.5, "references": [other], "evidence": {"x": 1}}, status=400)
    assert "derived" in refused["error"]["message"]
    refused = await report(reef, derived(other, "gossip"), status=400)
    assert "source" in refused["error"]["message"]


async def test_recipes_skip_switched_off_sources_and_derived_reports_a_person_overrode(
    start_reef: StartReef,
) -> None:
    counting_recipe.STEPS_TAKEN.clear()
    reef = await start_reef(recipe=RECIPE, reports__sources="person,next-turn")
    scored, judged, plain = await receipt(reef), await receipt(reef), await receipt(reef)
    await report(reef, {"score": 1, "references": [scored]})
    await report(reef, derived(scored))  # a person scored it already
    await report(reef, derived(judged, "judge"))  # judge is switched off
    await report(reef, derived(plain))  # counts: a step of two units

    async def state() -> dict[str, Any]:
        status: dict[str, Any] = await (await reef.get("/reef/status")).json()
        return dict(status["training"]["scenarios"].get("demo", {}))

    found = await eventually(state, 60, "one step and two refusals", satisfied=lambda s: s.get("steps") == 1)
    assert found["ineligible"] == {
        "a person scored this exchange; their report counts, not this next-turn one": 1,
        "reports from judge are switched off (reports.sources)": 1,
    }
    assert len(counting_recipe.STEPS_TAKEN[0]) == 2


async def test_only_a_persons_reports_count_when_told_so(start_reef: StartReef) -> None:
    counting_recipe.STEPS_TAKEN.clear()
    reef = await start_reef(recipe=RECIPE, reports__sources="person")
    first, second = await receipt(reef), await receipt(reef)
    await report(reef, derived(first))
    await report(reef, derived(second, "outcome", 1.0))
    await eventually(
        lambda: reef.record(second),
        60,
        "the outcome report refused",
        satisfied=lambda r: r["reports"][0]["ineligible"] == "reports from outcome are switched off (reports.sources)",
    )
    assert counting_recipe.STEPS_TAKEN == []


def add_record(conn: Connection, n: int, release: str, score: float | None, source: str | None) -> None:
    conn.execute(
        "INSERT INTO records (sequence, id, scenario, type, created_at, score, source, tags) VALUES (?,?,?,?,?,?,?,?)",
        (n, f"r{n}", "demo", "inference", float(n), score, source, json.dumps({"release": release})),
    )


def add_score(conn: Connection, n: int, source: str, score: float) -> None:
    conn.execute(
        "INSERT INTO record_scores (record_id, source, score, report_id, created_at) VALUES (?,?,?,?,?)",
        (f"r{n}", source, score, f"report-{n}-{source}", float(n)),
    )


async def test_live_scores_count_the_chosen_sources(tmp_path: Path, store_url: str | None) -> None:
    engine = open_engine(store_url, tmp_path)
    conn = engine.connect()
    migrate(conn, engine)
    add_record(conn, 1, "a", 0.9, "person")
    add_score(conn, 1, "person", 0.9)
    add_score(conn, 1, "next-turn", 0.1)
    add_record(conn, 2, "a", 0.3, "next-turn")
    add_score(conn, 2, "next-turn", 0.3)
    add_record(conn, 3, "a", None, None)
    reader = Reader(engine)
    scores = LiveScoreReader(reader)
    (everything,) = await scores.tallies("demo", ["a"], 0.5, 2)
    (people,) = await scores.tallies("demo", ["a"], 0.5, 2, ("person",))
    (derived_only,) = await scores.tallies("demo", ["a"], 0.5, 2, ("next-turn",))
    (since,) = await scores.sums("demo", ["a"], 0.0, ("next-turn",))
    reader.close()
    conn.close()
    assert (everything.scored, everything.total) == pytest.approx((2, 1.2))
    assert (people.scored, people.total, people.records) == pytest.approx((1, 0.9, 3))
    assert (derived_only.scored, derived_only.total) == pytest.approx((2, 0.4))
    assert (since.scored, since.total) == pytest.approx((2, 0.4))


def test_reports_stored_before_sources_came_from_a_person_or_an_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = open_engine(None, tmp_path)
    conn = engine.connect()
    before = MIGRATIONS.index(schema._report_sources) - 1  # the schema as it was before sources
    monkeypatch.setattr(schema, "MIGRATIONS", MIGRATIONS[:before])
    migrate(conn, engine)
    monkeypatch.setattr(schema, "MIGRATIONS", MIGRATIONS)
    rows = [
        (1, "live", "inference", 0.5, None, None),
        (2, "old", "inference", 1.0, None, json.dumps({"imported": "openai"})),
        (3, "p1", "report", 0.2, json.dumps({"score": 0.2, "references": ["live"]}), None),
        (4, "p2", "report", 0.5, json.dumps({"score": 0.5, "references": ["live"]}), None),
        (5, "i1", "report", 1.0, json.dumps({"score": 1.0, "references": ["old"]}), None),
    ]
    for sequence, record_id, kind, score, body, tags in rows:
        conn.execute(
            "INSERT INTO records (sequence, id, scenario, type, created_at, score, body, tags)"
            " VALUES (?,?,?,?,?,?,?,?)",
            (sequence, record_id, "demo", kind, float(sequence), score, body, tags),
        )
    migrate(conn, engine)
    sources = {row["id"]: row["source"] for row in conn.execute("SELECT id, source FROM records")}
    assert sources == {"live": "person", "old": "import", "p1": "person", "p2": "person", "i1": "import"}
    kept = conn.execute("SELECT record_id, source, score, report_id FROM record_scores ORDER BY record_id").fetchall()
    assert [tuple(row) for row in kept] == [("live", "person", 0.5, "p2"), ("old", "import", 1.0, "i1")]
