"""Two daemons' stores on one PostgreSQL database, in one process: each announces every commit of both, its own
(handed over by its writer, never read back) and the other's (read back after that one's NOTIFY), once each and in
sequence order, however the two daemons' commits interleave; and a daemon alone on the store sends no NOTIFY until
another daemon follows it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import psycopg
import pytest

from reef_contract import CHAT_ROUTE
from reef_daemon.ids import new_record_id
from reef_daemon.records import InferenceDraft
from reef_daemon.store import Event, Store
from reef_daemon.store.engines import follower
from reef_daemon.store.engines.engine import Connection
from reef_daemon.store.engines.postgres import PostgresEngine
from reef_daemon.store.events import EventLog
from tests.support.postgres import PostgresServer
from tests.support.waiting import eventually


def draft() -> InferenceDraft:
    body = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
    return InferenceDraft(
        id=new_record_id(), scenario="demo", route=CHAT_ROUTE, created_at=0.0, model="m",
        request=json.dumps(body).encode(), status=200, response=b"{}", stream=False, complete=True,
        error=None, ttft_ms=None, duration_ms=1.0, overhead_ms=None,
    )  # fmt: skip


async def test_each_daemon_announces_both_daemons_commits_once_and_in_order(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(follower, "POLL_S", 5.0)  # a follower reads back only after the other daemon's NOTIFY
    caught_up: list[follower.EventFollower] = []  # each follower reads what is committed once it is connected
    catch_up = follower.EventFollower._catch_up

    def counted_catch_up(self: follower.EventFollower, conn: Connection) -> None:
        catch_up(self, conn)
        caught_up.append(self)

    monkeypatch.setattr(follower.EventFollower, "_catch_up", counted_catch_up)
    heard: dict[str, list[Event]] = {"a": [], "b": []}
    stores = {
        name: Store(tmp_path / name, heard[name].extend, score_scale={"min": 0.0, "max": 1.0}, url=postgres_url)
        for name in heard
    }
    for store in stores.values():
        store.open(asyncio.get_running_loop())
    read_back: dict[str, list[int]] = {"a": [], "b": []}
    for name, store in stores.items():  # what each daemon's follower reads back from the database
        following = store._follower
        assert following is not None
        reads = following._read_back

        def counted(events: list[Event], name: str = name, reads=reads) -> None:  # type: ignore[no-untyped-def]
            read_back[name].extend(event.sequence for event in events)
            reads(events)

        following._read_back = counted  # type: ignore[method-assign]
    try:
        # Commits made while a follower connects are read back once, at its start: start from connected followers.
        await eventually(lambda: len(set(map(id, caught_up))) == 2, 30, "both followers connected")
        await stores["a"].scenarios.ensure("demo", "record", "auto")
        for _ in range(3):  # one daemon's commits alone, then the other's, then both at once
            await stores["a"].records.append_inference(draft())
        await eventually(lambda: len(heard["b"]) == 4, 30, "a's commits on b")
        for _ in range(3):
            await stores["b"].records.append_inference(draft())
        for _ in range(20):
            await asyncio.gather(*(store.records.append_inference(draft()) for store in stores.values()))
        committed = stores["a"].reader.run_blocking(lambda conn: EventLog.read_after(conn, 0, None, 1000))
        expected = [event.sequence for event in committed]
        assert len(expected) == 1 + 3 + 3 + 40
        for name in heard:

            def complete(events: list[Event] = heard[name]) -> bool:
                return len(events) >= len(expected)

            await eventually(complete, 30, f"every commit on {name}")
            assert [event.sequence for event in heard[name]] == expected
        # Neither follower read its own daemon's records back while the other daemon was quiet.
        mine_alone = {"a": expected[:4], "b": expected[4:7]}
        for name in heard:
            assert not set(read_back[name]) & set(mine_alone[name])
    finally:
        for store in stores.values():
            store.close()


async def test_a_lone_daemon_sends_no_notify_until_another_follows(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(follower, "POLL_S", 0.2)
    heard: list[Event] = []
    store = Store(tmp_path / "a", heard.extend, score_scale={"min": 0.0, "max": 1.0}, url=postgres_url)
    store.open(asyncio.get_running_loop())
    engine = store.engine
    assert isinstance(engine, PostgresEngine)
    listener = psycopg.connect(postgres_url, autocommit=True)
    try:
        listener.execute("LISTEN reef_store")
        await eventually(lambda: not engine.followed, 30, "the daemon to find itself alone")
        await store.scenarios.ensure("demo", "record", "auto")
        await store.records.append_inference(draft())
        assert len(heard) == 2  # its own commits are announced all the same
        assert list(listener.notifies(timeout=0.5)) == []
        # Another daemon's follower appears: within a poll, this daemon's commits wake it.
        other = psycopg.connect(postgres_url, autocommit=True, application_name="reef-follower")
        try:
            await eventually(lambda: engine.followed, 30, "the daemon to see another follow")
            await store.records.append_inference(draft())
            assert [notice.payload for notice in listener.notifies(timeout=5, stop_after=1)] != []
        finally:
            other.close()
    finally:
        listener.close()
        store.close()


async def test_a_store_reached_through_the_servers_unix_socket_writes_reads_and_is_named_so(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    url = postgres_server.socket_url(postgres_server.database())  # postgresql://user@/db?host=/folder&port=N
    store = Store(tmp_path / "s", lambda events: None, score_scale={"min": 0.0, "max": 1.0}, url=url)
    store.open(asyncio.get_running_loop())
    try:
        await store.scenarios.ensure("demo", "record", "auto")
        row = await store.records.append_inference(draft())
        assert store.engine.describe() == url
        conn = store.engine.connect(readonly=True)
        try:
            listed = conn.execute("SELECT id FROM records").fetchall()
            # over the socket indeed: a Unix-domain connection has no client address
            address = conn.execute("SELECT inet_client_addr() AS address").fetchone()["address"]
        finally:
            conn.close()
        assert [entry["id"] for entry in listed] == [row["id"]] and address is None
    finally:
        store.close()


@pytest.mark.parametrize(
    ("url", "described"),
    [
        ("postgresql:///reef?host=/run/postgresql", "postgresql:///reef?host=/run/postgresql"),
        ("postgresql://alice@/db?host=/tmp/pg&port=5433", "postgresql://alice@/db?host=/tmp/pg&port=5433"),
        ("postgresql://%2Frun%2Fpostgresql/reef", "postgresql:///reef?host=/run/postgresql"),
        ("postgresql:///reef", "postgresql:///reef"),  # libpq's default socket folder
        ("postgresql://alice:secret@db.example:5432/reef", "postgresql://alice@db.example:5432/reef"),
        ("postgresql://db.example/reef", "postgresql://db.example/reef"),
    ],
)
def test_a_store_url_is_described_without_its_password_and_a_socket_folder_as_a_host_parameter(
    url: str, described: str
) -> None:
    assert PostgresEngine(url).describe() == described
