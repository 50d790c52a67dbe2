"""The indexes on `records` that an exchange's commit no longer writes (migrations 15 and 16): the listings and counts
that read client records (reports, requests) by type still read an index, never the table; the per-scenario counts
are right on both engines; the unscored exchanges of every scenario are each scenario's own, merged, page by page
in either direction. The query plans are SQLite's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

import pytest

from reef_contract import INTERNAL_SCENARIOS
from reef_daemon.store.engines.engine import Connection
from reef_daemon.store.engines.schema import of_types
from reef_daemon.store.records import _COUNTS, _UNSCORED_SCENARIOS, RecordQuery, RecordStore
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


def every_page(conn: Connection, *, ascending: bool) -> list[list[int]]:
    """The sequences of each page of the unscored listing of every scenario, following the cursor it returns."""
    pages: list[list[int]] = []
    query = RecordQuery(unscored=True, limit=4, after=0 if ascending else None)
    while True:
        page = RecordStore._list(conn, query)
        if not page["records"]:
            return pages
        pages.append([row["sequence"] for row in page["records"]])
        if ascending:
            query = replace(query, after=page["next_after"])
        elif page["next_before"] is None:
            return pages
        else:
            query = replace(query, before=page["next_before"])


def test_the_unscored_of_every_scenario_page_by_page(migrated_conn: Connection) -> None:
    scenarios = ["a", "b", "c", *INTERNAL_SCENARIOS]
    unscored = []
    for n in range(1, 41):
        scenario, score = scenarios[n % len(scenarios)], (1.0 if n % 3 == 0 else None)
        add(migrated_conn, n, scenario, "inference" if n % 7 else "report", score)
        if n % 7 and score is None and scenario not in INTERNAL_SCENARIOS:
            unscored.append(n)
    newest_first = every_page(migrated_conn, ascending=False)
    assert [n for page in newest_first for n in page] == unscored[::-1]
    assert all(len(page) == 4 for page in newest_first[:-1])
    oldest_first = every_page(migrated_conn, ascending=True)
    assert [n for page in oldest_first for n in page] == unscored


class CommitsAfterNaming:
    """A connection on which two exchanges are committed right after the unscored scenarios are named: the first in
    a scenario not named, the second in one that was."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, parameters: Sequence[object] = ()) -> Any:
        cursor = self.conn.execute(sql, parameters)
        if sql != _UNSCORED_SCENARIOS:
            return cursor
        named = cursor.fetchall()
        add(self.conn, 3, "new", "inference")
        add(self.conn, 4, "b", "inference")
        return _Rows(named)


class _Rows:
    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def fetchall(self) -> list[Any]:
        return self.rows


def test_a_page_skips_nothing_committed_while_it_is_read(migrated_conn: Connection) -> None:
    add(migrated_conn, 1, "a", "inference")
    add(migrated_conn, 2, "b", "inference")
    first = RecordStore._list(cast(Connection, CommitsAfterNaming(migrated_conn)), RecordQuery(unscored=True, after=0))
    assert [row["sequence"] for row in first["records"]] == [1, 2]  # not 4 before 3 is seen
    rest = RecordStore._list(migrated_conn, RecordQuery(unscored=True, after=first["next_after"]))
    assert [row["sequence"] for row in rest["records"]] == [3, 4]


def test_no_index_holds_every_scenarios_unscored(migrated_sqlite_conn: Connection) -> None:
    names = {row[0] for row in migrated_sqlite_conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "records_unscored" not in names
    assert "records_unscored_by_scenario" in names
    plan = plan_of(migrated_sqlite_conn, _UNSCORED_SCENARIOS)
    assert plan.count("records_unscored_by_scenario") == 2  # the first scenario, then each next one
