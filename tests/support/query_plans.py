"""SQLite's query plan of a statement, for tests that say which index a read uses."""

from __future__ import annotations

from reef_daemon.store.engines.engine import Connection


def plan_of(conn: Connection, query: str, *parameters: object) -> str:
    """The plan's steps joined by " | " (each names the table or index it reads)."""
    return " | ".join(str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + query, parameters))
