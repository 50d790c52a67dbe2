"""The store's live-score tallies: records grouped by their `release` tag in SQL (over the index made for it), with
sessions, counts, sums and the trend per time window; untagged records and other scenarios left out."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from reef_daemon.store.live_scores import LiveScoreReader
from reef_daemon.store.reader import Reader
from reef_daemon.store.schema import connect, migrate


@pytest.fixture
def conn(tmp_path: Path) -> sqlite3.Connection:
    conn = connect(str(tmp_path / "reef.sqlite3"))
    migrate(conn)
    return conn


def add(conn: sqlite3.Connection, n: int, at: float, tags: dict[str, str] | None, score: float | None,
        scenario: str = "demo") -> None:  # fmt: skip
    conn.execute(
        "INSERT INTO records (sequence, id, scenario, type, created_at, score, tags) VALUES (?,?,?,?,?,?,?)",
        (n, f"r{n}", scenario, "inference", at, score, json.dumps(tags) if tags else None),
    )


async def test_records_are_tallied_per_release_with_a_trend(conn: sqlite3.Connection, tmp_path: Path) -> None:
    add(conn, 1, 0.0, {"release": "a", "session": "s1"}, 0.2)
    add(conn, 2, 10.0, {"release": "a", "session": "s1"}, 0.8)
    add(conn, 3, 50.0, {"release": "a", "session": "s2"}, None)
    add(conn, 4, 100.0, {"release": "b", "session": "s3"}, 1.0)
    add(conn, 5, 100.0, {"session": "s4"}, 0.1)  # no release: not a harness session
    add(conn, 6, 100.0, {"release": "a", "session": "s5"}, 0.0, scenario="other")

    reader = Reader(str(tmp_path / "reef.sqlite3"))
    a, b = await LiveScoreReader(reader).tallies("demo", 0.5, 4)
    reader.close()
    assert (a.release_id, a.sessions, a.records, a.scored, a.low) == ("a", 2, 3, 2, 1)
    assert (a.total, a.squares, a.first_at, a.last_at) == pytest.approx((1.0, 0.68, 0.0, 50.0))
    assert a.trend == pytest.approx([0.5, None, None, None])  # both scores in the first quarter of 0..100
    assert (b.release_id, b.sessions, b.records, b.scored, b.trend) == ("b", 1, 1, 1, [None, None, None, 1.0])


def test_the_grouping_reads_the_release_index(conn: sqlite3.Connection) -> None:
    plan = " ".join(
        str(row[-1])
        for row in conn.execute(
            "EXPLAIN QUERY PLAN SELECT json_extract(tags, '$.release'), count(*) FROM records"
            " WHERE scenario = ? AND type = 'inference' AND json_extract(tags, '$.release') IS NOT NULL GROUP BY 1",
            ("demo",),
        )
    )
    assert "records_by_harness_release" in plan
