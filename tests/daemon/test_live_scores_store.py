"""The store's live-score tallies: records grouped by their `release` tag in SQL (over the index made for it), with
sessions, counts, sums and the trend per time window; untagged records and other scenarios left out. The tallies
run on both engines; the query plans are SQLite's."""

from __future__ import annotations

import json

import pytest

from reef_daemon.harness.tables.live_scores import LiveScoreReader
from reef_daemon.store.engines.engine import Connection, Engine
from reef_daemon.store.engines.reader import Reader
from tests.support.query_plans import plan_of


def add(conn: Connection, n: int, at: float, tags: dict[str, str] | None, score: float | None,
        scenario: str = "demo") -> None:  # fmt: skip
    conn.execute(
        "INSERT INTO records (sequence, id, scenario, type, created_at, score, tags) VALUES (?,?,?,?,?,?,?)",
        (n, f"r{n}", scenario, "inference", at, score, json.dumps(tags) if tags else None),
    )


async def test_records_are_tallied_per_release_with_a_trend(migrated_conn: Connection, store_engine: Engine) -> None:
    add(migrated_conn, 1, 0.0, {"release": "a", "session": "s1"}, 0.2)
    add(migrated_conn, 2, 10.0, {"release": "a", "session": "s1"}, 0.8)
    add(migrated_conn, 3, 50.0, {"release": "a", "session": "s2"}, None)
    add(migrated_conn, 4, 100.0, {"release": "b", "session": "s3"}, 1.0)
    add(migrated_conn, 5, 100.0, {"session": "s4"}, 0.1)  # no release: not a harness session
    add(migrated_conn, 6, 100.0, {"release": "a", "session": "s5"}, 0.0, scenario="other")

    reader = Reader(store_engine)
    add(migrated_conn, 7, 100.0, {"release": "made-up", "session": "s6"}, 0.0)  # not a release of the scenario
    a, b = await LiveScoreReader(reader).tallies("demo", ["a", "b", "c"], 0.5, 4)
    reader.close()
    assert (a.release_id, a.sessions, a.records, a.scored, a.low) == ("a", 2, 3, 2, 1)
    assert (a.total, a.squares, a.first_at, a.last_at) == pytest.approx((1.0, 0.68, 0.0, 50.0))
    assert a.trend == pytest.approx([0.5, None, None, None])  # both scores in the first quarter of 0..100
    assert (b.release_id, b.sessions, b.records, b.scored, b.trend) == ("b", 1, 1, 1, [None, None, None, 1.0])


def test_the_grouping_reads_the_release_index(migrated_sqlite_conn: Connection) -> None:
    plan = plan_of(
        migrated_sqlite_conn,
        "SELECT json_extract(tags, '$.release'), count(*) FROM records WHERE scenario = ? AND type = 'inference'"
        " AND json_extract(tags, '$.release') IN (?, ?) GROUP BY 1",
        "demo",
        "a",
        "b",
    )
    assert "records_by_harness_release_time" in plan


async def test_a_canarys_period_is_summed(migrated_conn: Connection, store_engine: Engine) -> None:
    add(migrated_conn, 1, 5.0, {"release": "a"}, 1.0)  # before the canary started: left out
    add(migrated_conn, 2, 10.0, {"release": "a"}, 0.5)
    add(migrated_conn, 3, 20.0, {"release": "a"}, 0.25)
    add(migrated_conn, 4, 30.0, {"release": "a"}, None)
    add(migrated_conn, 5, 30.0, {"release": "b"}, 0.0, scenario="other")
    reader = Reader(store_engine)
    a, b = await LiveScoreReader(reader).sums("demo", ["a", "b"], 10.0)
    reader.close()
    assert (a.release_id, a.scored, a.total, a.squares) == ("a", 2, 0.75, 0.3125)
    assert (b.release_id, b.scored, b.total, b.squares) == ("b", 0, 0.0, 0.0)


def test_a_canarys_period_is_summed_through_the_index(migrated_sqlite_conn: Connection) -> None:
    """The check after each report searches the index for each release's records since the canary started,
    rather than reading the scenario's whole history."""
    plan = plan_of(
        migrated_sqlite_conn,
        "SELECT count(score), sum(score), sum(score * score) FROM records WHERE scenario = ? AND type = 'inference'"
        " AND json_extract(tags, '$.release') = ? AND created_at >= ? AND score IS NOT NULL",
        "demo",
        "a",
        10.0,
    )
    assert "SEARCH records USING" in plan and "INDEX records_by_harness_release_time" in plan
    assert "created_at>?" in plan
