"""The indexes on `records` that an exchange's commit no longer writes (migration 15): the listings and counts that
read client records (reports, requests) by type still read an index, never the table; the per-scenario counts
are right on both engines. The query plans are SQLite's."""

from __future__ import annotations

import pytest

from reef_daemon.store.engine import Connection
from reef_daemon.store.records import _COUNTS, RecordStore
from reef_daemon.store.schema import of_types
from tests.support.query_plans import plan_of


def add(conn: Connection, n: int, scenario: str, type: str, score: float | None = None) -> None:
    conn.execute(
        "INSERT INTO records (sequence, id, scenario, type, created_at, score) VALUES (?,?,?,?,?,?)",
        (n, f"r{n}", scenario, type, float(n), score),
    )


def test_counts_per_scenario_and_type(migrated_conn: Connection) -> None:
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
        add(migrated_conn, n, scenario, type, score)
    counts = RecordStore._counts(migrated_conn)
    assert counts == {
        "a": {"inference": 2, "report": 2, "request": 1, "unscored": 1},
        "b": {"report": 1},  # a scenario with reports alone has no inference count
        "c": {"inference": 1, "unscored": 1},
    }


def test_an_exchange_is_kept_out_of_the_type_indexes(migrated_sqlite_conn: Connection) -> None:
    add(migrated_sqlite_conn, 1, "a", "inference")
    add(migrated_sqlite_conn, 2, "a", "report")
    for index in ("client_records_by_type", "client_records_by_scenario_type"):
        (held,) = migrated_sqlite_conn.execute(
            f"SELECT count(*) FROM records INDEXED BY {index} WHERE type != 'inference'"
        )
        assert held[0] == 1


@pytest.mark.parametrize("type", ["report", "request"])
def test_client_records_of_a_type_are_read_from_an_index(migrated_sqlite_conn: Connection, type: str) -> None:
    clause, values = of_types((type,))
    by_scenario = plan_of(
        migrated_sqlite_conn,
        f"SELECT id FROM records WHERE scenario = ? AND {clause} AND sequence > ? ORDER BY sequence LIMIT 10",
        "a",
        *values,
        0,
    )
    assert "client_records_by_scenario_type" in by_scenario
    everywhere = plan_of(
        migrated_sqlite_conn, f"SELECT id FROM records WHERE {clause} ORDER BY sequence DESC LIMIT 10", *values
    )
    assert "client_records_by_type" in everywhere


def test_the_counts_read_indexes_alone(migrated_sqlite_conn: Connection) -> None:
    plan = plan_of(migrated_sqlite_conn, _COUNTS)
    assert "COVERING INDEX records_by_scenario" in plan
    assert "COVERING INDEX client_records_by_scenario_type" in plan or "COVERING INDEX client_records_by_type" in plan
    assert "SCAN records |" not in f"{plan} |"  # no pass over the table's rows
