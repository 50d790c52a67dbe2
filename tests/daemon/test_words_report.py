"""The `words` report source on a real store: the user's next message scores the earlier answer at the bottom or the
top of the deployment's scale, once, with the rule that decided and none of the user's code; a message the rules
cannot tell, or `reports.words` off, makes no report; a `words` score counts before a judge's, after a person's."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from reef_contract import CHAT_ROUTE, ReportSource
from reef_daemon.ids import new_record_id
from reef_daemon.records import ClientRecordDraft, InferenceDraft
from reef_daemon.reports.words_report import words_report
from reef_daemon.settings import ReportsSection
from reef_daemon.store import Store
from tests.support.reef_testing import CHAT, StartReef

SCENARIO = "coding"
SCALE = ReportsSection(score_min=-1.0, score_max=2.0)  # reports.words as it is by default


@pytest.fixture
async def store(tmp_path: Path, store_url: str | None) -> AsyncIterator[Store]:
    store = Store(tmp_path, lambda _events: None, score_scale={"min": -1.0, "max": 2.0}, url=store_url)
    store.open(asyncio.get_running_loop())
    yield store
    await asyncio.to_thread(store.close)


async def answered(store: Store) -> str:
    record_id = new_record_id()
    body = {"model": "m", "messages": [{"role": "user", "content": "fix the parser"}]}
    draft = InferenceDraft(
        id=record_id, scenario=SCENARIO, route=CHAT_ROUTE, created_at=time.time(), model="m",
        request=json.dumps(body).encode(), status=200, response=b"{}", stream=False, complete=True, error=None,
        ttft_ms=None, duration_ms=1.0, overhead_ms=None,
    )  # fmt: skip
    await store.records.append_inference(draft)
    return record_id


async def scored(store: Store, record_id: str, source: ReportSource, score: float) -> None:
    content = {"references": [record_id], "score": score}
    digest = hashlib.sha256(f"{record_id} {source}".encode()).hexdigest()
    await store.records.append_client_record(
        ClientRecordDraft(new_record_id(), SCENARIO, "report", time.time(), content, digest, source)
    )


async def test_the_users_words_score_the_earlier_answer_at_the_ends_of_the_scale(store: Store) -> None:
    wrong, right = await answered(store), await answered(store)
    low = words_report(SCENARIO, wrong, "next-1", "No, that is wrong:\n```\nSECRET_TOKEN = 'x'\n```", SCALE)
    high = words_report(SCENARIO, right, "next-2", "Thanks, that works", SCALE)
    assert low is not None and high is not None
    for draft in (low, high):
        assert (await store.records.append_client_record(draft))[1] is True

    assert (await store.records.get(wrong))["score"] == -1.0
    assert (await store.records.get(right))["score"] == 2.0
    assert low.source == "words" and low.content["references"] == [wrong]
    evidence = {"rule": "no", "next_record": "next-1", "next_message": "No, that is wrong: [code]"}
    assert low.content["evidence"] == evidence
    assert high.content["evidence"]["rule"] == "that works"
    again = words_report(SCENARIO, wrong, "next-3", "still fails", SCALE)
    assert again is not None and (await store.records.append_client_record(again))[1] is False  # once per record
    assert (await store.records.get(wrong))["score"] == -1.0


def test_what_the_rules_cannot_tell_and_words_off_make_no_report() -> None:
    assert words_report(SCENARIO, "a" * 32, "next", "can you also add type hints?", SCALE) is None
    off = ReportsSection(words="off")
    assert words_report(SCENARIO, "a" * 32, "next", "No, that is wrong", off) is None


async def test_words_count_after_a_person_and_before_a_judge(store: Store) -> None:
    record_id = await answered(store)
    await scored(store, record_id, "next-turn", 1.5)
    await scored(store, record_id, "judge", 1.0)
    draft = words_report(SCENARIO, record_id, "next", "still broken", SCALE)
    assert draft is not None
    await store.records.append_client_record(draft)
    assert (await store.records.get(record_id))["score"] == -1.0
    await scored(store, record_id, "person", 0.5)
    assert (await store.records.get(record_id))["score"] == 0.5


async def test_a_daemon_takes_words_reports_and_can_count_them_alone(start_reef: StartReef) -> None:
    reef = await start_reef(reports__sources="words")
    response = await reef.post("/v1/chat/completions", CHAT)
    record_id = response.headers["x-reef-agent-record-id"]
    body = {"score": 0.0, "references": [record_id], "source": "words", "evidence": {"rule": "no"}}
    reported = await reef.post("/reef/report", body)
    assert reported.status == 200, await reported.text()
    shown = await reef.record(record_id)
    assert (shown["score"], shown["source"]) == (0.0, "words")
