"""The indexes on `records` that an exchange's commit no longer writes (migration 15): the listings and counts that
read client records (reports, requests) by type still read an index, never the table; the per-scenario counts
are right on both engines. The query plans are SQLite's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reef_daemon.store.engine import Connection, Engine, open_engine
from reef_daemon.store.records import _COUNTS, RecordStore
from reef_daemon.store.schema import migrate, of_types


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


def add(conn: Connection, n: int, scenario: str, type: str, score: float | None = None) -> None:
    conn.execute(
        "INSERT INTO records (sequence, id, scenario, type, created_at, score) VALUES (?,?,?,?,?,?)",
        (n, f"r{n}", scenario, type, float(n), score),
    )


def plan_of(conn: Connection, query: str, *parameters: object) -> str:
    return " | ".join(str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + query, parameters))


def test_counts_per_scenario_and_type(conn: Connection) -> None:
    rows = [
        ("a", "inference", None),
        ("a", "inference", 1.0),
        ("a", "report", None),
        ("a", "request", None),
        ("a", "report", None),
        ("b", "report", None),
        ("c", "inference", None),
    ]
    for n, (scenario, type, score) in enumerate(rows, start=1):
        add(conn, n, scenario, type, score)
    counts = RecordStore._counts(conn)
    assert counts == {
        "a": {"inference": 2, "report": 2, "request": 1, "unscored": 1},
        "b": {"report": 1},  # a scenario with reports alone has no inference count
        "c": {"inference": 1, "unscored": 1},
    }


def test_an_exchange_is_kept_out_of_the_type_indexes(sqlite_conn: Connection) -> None:
    add(sqlite_conn, 1, "a", "inference")
    add(sqlite_conn, 2, "a", "report")
    for index in ("client_records_by_type", "client_records_by_scenario_type"):
        (held,) = sqlite_conn.execute(f"SELECT count(*) FROM records INDEXED BY {index} WHERE type != 'inference'")
        assert held[0] == 1


@pytest.mark.parametrize("type", ["report", "request"])
def test_client_records_of_a_type_are_read_from_an_index(sqlite_conn: Connection, type: str) -> None:
    clause, values = of_types((type,))
    by_scenario = plan_of(
        sqlite_conn,
        f"SELECT id FROM records WHERE scenario = ? AND {clause} AND sequence > ? ORDER BY sequence LIMIT 10",
        "a",
        *values,
        0,
    )
    assert "client_records_by_scenario_type" in by_scenario
    everywhere = plan_of(sqlite_conn, f"SELECT id FROM records WHERE {clause} ORDER BY sequence DESC LIMIT 10", *values)
    assert "client_records_by_type" in everywhere


def test_the_counts_read_indexes_alone(sqlite_conn: Connection) -> None:
    plan = plan_of(sqlite_conn, _COUNTS)
    assert "COVERING INDEX records_by_scenario" in plan
    assert "COVERING INDEX client_records_by_scenario_type" in plan or "COVERING INDEX client_records_by_type" in plan
    assert "SCAN records |" not in f"{plan} |"  # no pass over the table's rows
