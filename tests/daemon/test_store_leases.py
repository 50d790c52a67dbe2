"""Scenario leases on a shared store (store/leases.py): one daemon at a time runs a scenario's worker. A PostgreSQL
restart ends every session, and the advisory locks held on them, while the holder may be in the middle of a step:
the lease stays with its holder, never granted to another daemon meanwhile; a holder that is gone leaves it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg

from reef_daemon.store.engines.engine import lock_key
from reef_daemon.store.engines.leases import AdvisoryLeases
from reef_daemon.store.engines.opening import open_engine
from tests.support.postgres import PostgresServer
from tests.support.waiting import eventually


def lock_held(url: str, scenario: str) -> bool:
    """Whether some session holds the scenario's lease on the server (an advisory lock on a bigint key is kept as
    its high and low 32 bits)."""
    key = lock_key(f"worker:{scenario}") & 0xFFFFFFFFFFFFFFFF
    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = %s"
                " AND objid = %s AND objsubid = 1",
                (key >> 32, key & 0xFFFFFFFF),
            ).fetchone()
    except psycopg.OperationalError:  # the server is still starting
        return False
    return row is not None and row[0] == 1


async def test_a_lease_stays_with_its_holder_across_a_server_restart(postgres_server: PostgresServer) -> None:
    url = postgres_server.database()
    holder = AdvisoryLeases(open_engine(url, Path(".")))
    other = AdvisoryLeases(open_engine(url, Path(".")))
    try:
        assert await holder.take("demo") and not await other.take("demo")
        await asyncio.to_thread(postgres_server.stop)
        await asyncio.to_thread(postgres_server.start)

        # The holder is inside a step and asks nothing; the other daemon's worker tries for the lease as it does.
        tries: list[bool] = []

        async def held_again() -> bool:
            tries.append(await other.take("demo"))
            return await asyncio.to_thread(lock_held, url, "demo")

        await eventually(held_again, 60, "the lease to be held again after the restart")
        assert not any(tries), "the lease was granted to another daemon while its holder lived"
        assert await holder.holds("demo")

        await asyncio.to_thread(holder.close)  # its daemon is gone: the other takes the scenario over
        await eventually(lambda: other.take("demo"), 60, "the other daemon to take the lease over")
    finally:
        await asyncio.to_thread(holder.close)
        await asyncio.to_thread(other.close)
