"""The task store, driven directly on a fresh database: tasks are kept, listed and removed per scenario; replays are
the opening turns of the newest low-scored conversations (low: below the middle of the score scale), deduplicated,
without conversations that have no user turn; promote and dismiss take a replay off the list for good; and
`gate_tasks` is the protected tasks then the replays, in a stable order."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from reef_contract import (
    CHAT_ROUTE,
    MESSAGES_ROUTE,
    PERSON_SOURCE,
    RESPONSES_ROUTE,
    ReportSource,
    ScoreScale,
)
from reef_daemon.errors import BadRequest, Conflict, NotFound
from reef_daemon.harness.tables.tasks import PAGE_FIXTURE_CHARS
from reef_daemon.ids import new_record_id
from reef_daemon.records import ClientRecordDraft, InferenceDraft
from reef_daemon.store import Store, TaskDraft, TaskLimits, gate_tasks

SCENARIO = "coding"


@pytest.fixture
async def store(tmp_path: Path, store_url: str | None) -> AsyncIterator[Store]:
    store = Store(tmp_path, lambda _events: None, score_scale={"min": 0.0, "max": 1.0}, url=store_url)
    store.open(asyncio.get_running_loop())
    yield store
    await asyncio.to_thread(store.close)


async def conversation(
    store: Store,
    opening: str | None,
    score: float | None,
    *,
    route: str = CHAT_ROUTE,
    scenario: str = SCENARIO,
    source: ReportSource = PERSON_SOURCE,
) -> str:
    """Record a conversation that opened with `opening` (None: a request with no user turn), scored `score` by a
    report from `source`."""
    if route == RESPONSES_ROUTE:
        body: dict[str, object] = {"model": "m", "input": opening or []}
    else:
        messages: list[dict[str, object]] = [{"role": "assistant", "content": "earlier answer"}]
        if opening is not None:
            messages = [
                {"role": "user", "content": [{"type": "text", "text": opening}]},
                {"role": "assistant", "content": "working on it"},
                {"role": "user", "content": "and the follow-up"},
            ]
        body = {"model": "m", "messages": messages}
    record_id = new_record_id()
    draft = InferenceDraft(
        id=record_id, scenario=scenario, route=route, created_at=time.time(), model="m",
        request=json.dumps(body).encode(), status=200, response=b"{}", stream=False, complete=True, error=None,
        ttft_ms=None, duration_ms=1.0, overhead_ms=None,
    )  # fmt: skip
    await store.records.append_inference(draft)
    if score is not None:
        content = {"references": [record_id], "score": score}
        digest = hashlib.sha256(f"{record_id} {source}".encode()).hexdigest()
        report = ClientRecordDraft(new_record_id(), scenario, "report", time.time(), content, digest, source)
        await store.records.append_client_record(report)
    return record_id


async def test_tasks_are_added_listed_and_removed_per_scenario(store: Store) -> None:
    first = await store.tasks.add(TaskDraft(SCENARIO, "fix the bug", {"src/a.py": "x = 1\n"}, regex=r"fixed"))
    second = await store.tasks.add(TaskDraft(SCENARIO, "explain", judge="is it clear?", protected=True))
    await store.tasks.add(TaskDraft("other", "elsewhere"))

    assert first["id"].startswith("t-") and first["kind"] == "task"
    assert await store.tasks.list(SCENARIO) == [first, second]
    assert await store.tasks.get(SCENARIO, second["id"]) == second
    assert (await store.tasks.list(SCENARIO))[0]["fixture"] == {"src/a.py": "x = 1\n"}

    assert await store.tasks.remove(SCENARIO, first["id"]) == first
    assert await store.tasks.list(SCENARIO) == [second]
    with pytest.raises(NotFound, match="no task"):
        await store.tasks.remove(SCENARIO, first["id"])
    with pytest.raises(NotFound):
        await store.tasks.get("other", second["id"])  # a task belongs to its scenario


async def test_replays_are_the_newest_low_scored_opening_turns(store: Store) -> None:
    await conversation(store, "oldest failure", 0.1)
    await conversation(store, "went fine", 0.9)
    await conversation(store, "exactly the middle", 0.5)  # not below the middle: not low
    await conversation(store, "never scored", None)
    await conversation(store, None, 0.0)  # no user turn: nothing to replay
    await conversation(store, "responses failure", 0.2, route=RESPONSES_ROUTE)
    await conversation(store, "messages failure", 0.3, route=MESSAGES_ROUTE)
    repeated = await conversation(store, "oldest failure", 0.0)  # the same opening again: offered once
    await conversation(store, "another scenario", 0.0, scenario="other")

    replays = await store.tasks.replays(SCENARIO, 10)

    assert [r["prompt"] for r in replays] == ["oldest failure", "messages failure", "responses failure"]
    assert replays[0]["id"] == f"r-{repeated}" and replays[0]["source_record"] == repeated
    assert all(r["kind"] == "replay" and not r["protected"] and r["fixture"] == {} for r in replays)
    assert [r["prompt"] for r in await store.tasks.replays(SCENARIO, 2)] == ["oldest failure", "messages failure"]


async def test_replays_count_only_the_chosen_report_sources(store: Store) -> None:
    judged_low = await conversation(store, "the judge disliked it", 0.1, source="next-turn")
    await conversation(store, "a person disliked it", 0.1)
    overruled = await conversation(store, "the judge disliked, a person liked", 0.1, source="next-turn")
    content = {"references": [overruled], "score": 0.9}
    await store.records.append_client_record(
        ClientRecordDraft(new_record_id(), SCENARIO, "report", time.time(), content, "person-liked")
    )

    everything = await store.tasks.replays(SCENARIO, 10)
    judged = await store.tasks.replays(SCENARIO, 10, ["next-turn"])
    people = await gate_tasks(store, SCENARIO, 10, ["person"])

    # Every source: a person's score wins over the judge's, so the overruled conversation is no replay.
    assert [r["prompt"] for r in everything] == ["a person disliked it", "the judge disliked it"]
    # The judge's alone: both conversations it scored low, whatever a person said.
    assert [r["source_record"] for r in judged] == [overruled, judged_low]
    assert [r["prompt"] for r in people] == ["a person disliked it"]


async def test_low_follows_the_configured_score_scale(tmp_path: Path, store_url: str | None) -> None:
    scale: ScoreScale = {"min": 1.0, "max": 5.0}
    store = Store(tmp_path, lambda _events: None, score_scale=scale, url=store_url)
    store.open(asyncio.get_running_loop())
    try:
        await conversation(store, "scored two of five", 2.0)
        await conversation(store, "scored three of five", 3.0)
        await conversation(store, "scored four of five", 4.0)
        assert [r["prompt"] for r in await store.tasks.replays(SCENARIO, 5)] == ["scored two of five"]
    finally:
        await asyncio.to_thread(store.close)


async def test_promote_makes_a_protected_task_and_the_replay_goes(store: Store) -> None:
    record = await conversation(store, "the failing session", 0.0)
    other = await conversation(store, "the failing session", 0.1)  # the same words in another conversation

    task = await store.tasks.promote(SCENARIO, f"r-{record}")

    assert task["kind"] == "task" and task["protected"] and task["source_record"] == record
    assert task["prompt"] == "the failing session"
    assert await store.tasks.list(SCENARIO) == [task]
    assert await store.tasks.replays(SCENARIO, 5) == []
    with pytest.raises(Conflict, match="already promoted"):
        await store.tasks.promote(SCENARIO, f"r-{record}")
    assert (await store.tasks.get(SCENARIO, f"r-{other}"))["prompt"] == "the failing session"


async def test_dismiss_hides_a_replay_and_its_repeats(store: Store) -> None:
    await conversation(store, "not worth replaying", 0.0)
    newest = await conversation(store, "not worth replaying", 0.0)
    kept = await conversation(store, "worth replaying", 0.0)

    await store.tasks.dismiss(SCENARIO, f"r-{newest}")
    await store.tasks.dismiss(SCENARIO, f"r-{newest}")  # twice is once

    assert [r["id"] for r in await store.tasks.replays(SCENARIO, 5)] == [f"r-{kept}"]
    with pytest.raises(Conflict, match="already dismissed"):
        await store.tasks.promote(SCENARIO, f"r-{newest}")


async def test_refusals_name_what_is_wrong(store: Store) -> None:
    task = await store.tasks.add(TaskDraft(SCENARIO, "a task"))
    silent = await conversation(store, None, 0.0)
    with pytest.raises(BadRequest, match="not a replay"):
        await store.tasks.promote(SCENARIO, task["id"])
    with pytest.raises(BadRequest, match="dismiss it instead"):
        await store.tasks.remove(SCENARIO, f"r-{silent}")
    with pytest.raises(BadRequest, match="no user turn"):
        await store.tasks.dismiss(SCENARIO, f"r-{silent}")
    with pytest.raises(NotFound, match="no conversation"):
        await store.tasks.promote(SCENARIO, "r-0123")
    with pytest.raises(NotFound, match="no conversation"):
        await store.tasks.promote("other", f"r-{silent}")  # a record of another scenario


async def test_gate_tasks_are_protected_tasks_then_replays(store: Store) -> None:
    guard = await store.tasks.add(TaskDraft(SCENARIO, "must keep working", regex="ok", protected=True))
    await store.tasks.add(TaskDraft(SCENARIO, "only a note"))  # not protected: not run by the gate
    later_guard = await store.tasks.add(TaskDraft(SCENARIO, "also guarded", judge="does it work?", protected=True))
    await conversation(store, "first failure", 0.0)
    await conversation(store, "second failure", 0.0)
    await conversation(store, "third failure", 0.0)

    gate = await gate_tasks(store, SCENARIO, 2)

    assert [t["prompt"] for t in gate] == [guard["prompt"], later_guard["prompt"], "third failure", "second failure"]
    assert await gate_tasks(store, SCENARIO, 2) == gate  # stable
    assert [t["kind"] for t in await gate_tasks(store, SCENARIO, 0)] == ["task", "task"]


async def test_tasks_survive_a_reopen(tmp_path: Path, store: Store, store_url: str | None) -> None:
    task = await store.tasks.add(TaskDraft(SCENARIO, "kept", {"notes.md": "é"}, protected=True))
    await asyncio.to_thread(store.close)
    again = Store(tmp_path, lambda _events: None, score_scale={"min": 0.0, "max": 1.0}, url=store_url)
    again.open(asyncio.get_running_loop())
    try:
        assert await again.tasks.list(SCENARIO) == [task]
    finally:
        await asyncio.to_thread(again.close)


async def test_tasks_follow_their_scenario_when_it_is_archived(store: Store) -> None:
    await store.scenarios.ensure(SCENARIO, "record", "auto")
    await store.tasks.add(TaskDraft(SCENARIO, "belongs to the old scenario", protected=True))
    await conversation(store, "an old failure", 0.0)

    archived_as = await store.scenarios.archive(SCENARIO)

    assert await gate_tasks(store, SCENARIO, 5) == []  # the name is free again, with nothing to evaluate
    assert [t["prompt"] for t in await gate_tasks(store, archived_as, 5)] == [
        "belongs to the old scenario",
        "an old failure",
    ]


async def test_a_page_of_tasks_ends_once_its_fixtures_are_large(store: Store) -> None:
    big = {"a.txt": "x" * (PAGE_FIXTURE_CHARS // 2 + 1)}
    limits = TaskLimits(tasks=10, fixture_chars=10 * PAGE_FIXTURE_CHARS)
    added = [await store.tasks.add(TaskDraft(SCENARIO, f"task {n}", big), limits) for n in range(4)]
    first = await store.tasks.page(SCENARIO, None, 50)
    assert [task["id"] for task in first.tasks] == [task["id"] for task in added[:2]]  # the 2nd passes the bound
    assert first.next_after == added[1]["id"]
    rest = await store.tasks.page(SCENARIO, first.next_after, 50)
    assert [task["id"] for task in rest.tasks] == [added[2]["id"], added[3]["id"]] and rest.next_after is None
