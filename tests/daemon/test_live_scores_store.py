"""The store's live-score tallies: records grouped by their `release` tag in SQL (over the index made for it), with
sessions, counts, sums and the trend per time window; untagged records and other scenarios left out. The tallies
run on both engines; the query plans are SQLite's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from reef_daemon.store.engine import Connection, Engine, open_engine
from reef_daemon.store.live_scores import LiveScoreReader
from reef_daemon.store.reader import Reader
from reef_daemon.store.schema import migrate


@pytest.fixture
def engine(tmp_path: Path, store_url: str | None) -> Engine:
    return open_engine(store_url, tmp_path)


@pytest.fixture
def conn(engine: Engine) -> Iterator[Connection]:
    conn = engine.connect()
    migrate(conn, engine)
    yield conn
    conn.close()


@pytest.fixture
def sqlite_conn(tmp_path: Path) -> Iterator[Connection]:
    engine = open_engine(None, tmp_path)
    conn = engine.connect()
    migrate(conn, engine)
    yield conn
    conn.close()


def add(conn: Connection, n: int, at: float, tags: dict[str, str] | None, score: float | None,
        scenario: str = "demo") -> None:  # fmt: skip
    conn.execute(
        "INSERT INTO records (sequence, id, scenario, type, created_at, score, tags) VALUES (?,?,?,?,?,?,?)",
        (n, f"r{n}", scenario, "inference", at, score, json.dumps(tags) if tags else None),
    )


async def test_records_are_tallied_per_release_with_a_trend(conn: Connection, engine: Engine) -> None:
    add(conn, 1, 0.0, {"release": "a", "session": "s1"}, 0.2)
    add(conn, 2, 10.0, {"release": "a", "session": "s1"}, 0.8)
    add(conn, 3, 50.0, {"release": "a", "session": "s2"}, None)
    add(conn, 4, 100.0, {"release": "b", "session": "s3"}, 1.0)
    add(conn, 5, 100.0, {"session": "s4"}, 0.1)  # no release: not a harness session
    add(conn, 6, 100.0, {"release": "a", "session": "s5"}, 0.0, scenario="other")

    reader = Reader(engine)
    add(conn, 7, 100.0, {"release": "made-up", "session": "s6"}, 0.0)  # not a release of the scenario
    a, b = await LiveScoreReader(reader).tallies("demo", ["a", "b", "c"], 0.5, 4)
    reader.close()
    assert (a.release_id, a.sessions, a.records, a.scored, a.low) == ("a", 2, 3, 2, 1)
    assert (a.total, a.squares, a.first_at, a.last_at) == pytest.approx((1.0, 0.68, 0.0, 50.0))
    assert a.trend == pytest.approx([0.5, None, None, None])  # both scores in the first quarter of 0..100
    assert (b.release_id, b.sessions, b.records, b.scored, b.trend) == ("b", 1, 1, 1, [None, None, None, 1.0])


def plan_of(conn: Connection, query: str, *parameters: object) -> str:
    return " ".join(str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + query, parameters))


def test_the_grouping_reads_the_release_index(sqlite_conn: Connection) -> None:
    plan = plan_of(
        sqlite_conn,
        "SELECT json_extract(tags, '$.release'), count(*) FROM records WHERE scenario = ? AND type = 'inference'"
        " AND json_extract(tags, '$.release') IN (?, ?) GROUP BY 1",
        "demo",
        "a",
        "b",
    )
    assert "records_by_harness_release_time" in plan


async def test_a_canarys_period_is_summed(conn: Connection, engine: Engine) -> None:
    add(conn, 1, 5.0, {"release": "a"}, 1.0)  # before the canary started: left out
    add(conn, 2, 10.0, {"release": "a"}, 0.5)
    add(conn, 3, 20.0, {"release": "a"}, 0.25)
    add(conn, 4, 30.0, {"release": "a"}, None)
    add(conn, 5, 30.0, {"release": "b"}, 0.0, scenario="other")
    reader = Reader(engine)
    a, b = await LiveScoreReader(reader).sums("demo", ["a", "b"], 10.0)
    reader.close()
    assert (a.release_id, a.scored, a.total, a.squares) == ("a", 2, 0.75, 0.3125)
    assert (b.release_id, b.scored, b.total, b.squares) == ("b", 0, 0.0, 0.0)


def test_a_canarys_period_is_summed_through_the_index(sqlite_conn: Connection) -> None:
    """The check after each report searches the index for each release's records since the canary started,
    rather than reading the scenario's whole history."""
    plan = plan_of(
        sqlite_conn,
        "SELECT count(score), sum(score), sum(score * score) FROM records WHERE scenario = ? AND type = 'inference'"
        " AND json_extract(tags, '$.release') = ? AND created_at >= ? AND score IS NOT NULL",
        "demo",
        "a",
        10.0,
    )
    assert "SEARCH records USING" in plan and "INDEX records_by_harness_release_time" in plan
    assert "created_at>?" in plan
