"""The retention budget, on both engines: the oldest bodies beyond store.max-bytes (or older than store.max-age) are
trimmed, their rows, scores and token counts kept; a body an unsettled step still needs is kept; status shows the
use against the budget."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from pathlib import Path

from reef_contract import CHAT_ROUTE
from reef_daemon.ids import new_record_id
from reef_daemon.records import ClientRecordDraft, InferenceDraft
from reef_daemon.store import Budget, Protected, StepCommit, Store
from tests.support.reef_testing import CHAT, StartReef
from tests.support.waiting import eventually

BODY = 1000  # bytes of request per record, about


async def started(tmp_path: Path, url: str | None, budget: Budget) -> Store:
    store = Store(tmp_path, lambda _events: None, score_scale={"min": 0.0, "max": 1.0}, url=url, budget=budget)
    store.open(asyncio.get_running_loop())
    await store.scenarios.ensure("demo", "counting", "auto")
    return store


async def exchange(store: Store, created_at: float, scenario: str = "demo") -> str:
    record_id = new_record_id()
    body = {"model": "m", "messages": [{"role": "user", "content": "x" * BODY}]}
    await store.records.append_inference(
        InferenceDraft(
            id=record_id, scenario=scenario, route=CHAT_ROUTE, created_at=created_at, model="m",
            request=json.dumps(body).encode(), status=200, response=b"{}", stream=False, complete=True,
            error=None, ttft_ms=None, duration_ms=1.0, overhead_ms=None,
        )
    )  # fmt: skip
    return record_id


async def reported(store: Store, record_id: str) -> str:
    content = {"references": [record_id], "score": 1}
    draft = ClientRecordDraft(
        new_record_id(), "demo", "report", time.time(), content, hashlib.sha256(record_id.encode()).hexdigest()
    )
    row, _created = await store.records.append_client_record(draft)
    return str(row["id"])


async def test_the_oldest_bodies_beyond_the_budget_go_and_what_a_step_needs_stays(
    tmp_path: Path, store_url: str | None
) -> None:
    store = await started(tmp_path, store_url, Budget(max_bytes=5 * BODY))
    try:
        now = time.time()
        records = [await exchange(store, now + n) for n in range(10)]
        settled = await reported(store, records[0])  # consumed by a step below: its record may go
        await reported(store, records[1])  # no step consumed it yet: its record stays
        await store.steps.commit(StepCommit("demo", 1, "training", "selected", consumed=(settled,)))
        before = await store.retention.usage()
        assert before.body_bytes > 10 * BODY and before.trimmed == 0

        trimmed = await store.retention.trim(Protected(["demo"]))
        after = await store.retention.usage()
        assert after.body_bytes <= 5 * BODY + BODY and after.trimmed == trimmed
        kept = await store.records.get(records[1])
        assert kept["request"] is not None  # an unsettled step needs it
        gone = await store.records.get(records[0])
        assert gone["request"] is None and gone["response"] is None and gone["answer"] is None
        assert gone["score"] == 1 and gone["usage"] == kept["usage"] and gone["id"] == records[0]  # the row stays
        newest = await store.records.get(records[-1])
        assert newest["request"] is not None  # the oldest go first
        assert await store.retention.trim(Protected(["demo"])) == 0  # within budget now: nothing more
    finally:
        await asyncio.to_thread(store.close)


async def test_bodies_older_than_the_age_go(tmp_path: Path, store_url: str | None) -> None:
    store = await started(tmp_path, store_url, Budget(max_age_s=3600))
    try:
        old = await exchange(store, time.time() - 7200)
        fresh = await exchange(store, time.time())
        assert await store.retention.trim(Protected()) == 1
        assert (await store.records.get(old))["request"] is None
        assert (await store.records.get(fresh))["request"] is not None
    finally:
        await asyncio.to_thread(store.close)


async def test_status_shows_the_use_against_the_budget(start_reef: StartReef) -> None:
    reef = await start_reef(store__max_bytes="2K", store__max_age="30d")
    for _ in range(5):
        assert (await reef.post("/v1/chat/completions", CHAT)).status == 200
    await reef.daemon.store.retention.trim(Protected())
    store = (await (await reef.get("/reef/status")).json())["store"]
    assert store["max_bytes"] == 2048 and store["max_age_s"] == 30 * 86400
    assert 0 < store["body_bytes"] <= 2048 and store["trimmed"] >= 1


async def test_on_a_shared_store_a_body_another_daemons_recipe_waits_for_is_kept(
    tmp_path: Path, postgres_url: str, start_reef: StartReef
) -> None:
    """A daemon that records (its recipe trains nothing) and bounds the bodies shares the store with one whose recipe
    trains "demo": the record a report of "demo" references waits for that recipe's step, so it stays."""
    other = Store(tmp_path / "other", lambda _events: None, score_scale={"min": 0.0, "max": 1.0}, url=postgres_url)
    other.open(asyncio.get_running_loop())
    try:
        await other.scenarios.ensure("demo", "sao", "auto")  # the other daemon runs sao
        waiting = await exchange(other, time.time())
        await reported(other, waiting)  # no step consumed it yet
        await other.scenarios.ensure("chat", "record", "auto")
        chatted = await exchange(other, time.time(), "chat")
    finally:
        await asyncio.to_thread(other.close)

    reef = await start_reef(store__url=postgres_url, store__max_bytes="1K")  # its first pass runs at start

    async def trimmed() -> bool:
        return (await reef.record(chatted))["request"] is None

    await eventually(trimmed, 30, "the retention pass to trim what no recipe needs")
    assert (await reef.record(waiting))["request"] is not None
