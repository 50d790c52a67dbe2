"""`reef store copy`: a deployment's store moves from SQLite to PostgreSQL and back with every record, report, step,
task and event as it was; a second run adds nothing; an interrupted copy resumes; counts are checked."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from reef_cli.app import app
from reef_daemon.contract import CHAT_ROUTE
from reef_daemon.ids import new_record_id
from reef_daemon.records import ClientRecordDraft, InferenceDraft
from reef_daemon.store import StepCommit, Store, TaskDraft
from reef_daemon.store import copy as store_copy
from reef_daemon.store.copy import copy_store

SCALE = {"min": 0.0, "max": 1.0}


async def fill(store: Store, conversations: int) -> None:
    await store.scenarios.ensure("demo", "record", "auto")
    for n in range(conversations):
        record_id = new_record_id()
        body = {"model": "m", "messages": [{"role": "user", "content": f"question {n}"}]}
        await store.records.append_inference(
            InferenceDraft(
                id=record_id, scenario="demo", route=CHAT_ROUTE, created_at=time.time(), model="m",
                request=json.dumps(body).encode(), status=200, response=b'{"choices": []}', stream=False,
                complete=True, error=None, ttft_ms=None, duration_ms=1.0, overhead_ms=None, tags={"release": "r1"},
            )
        )  # fmt: skip
        content = {"references": [record_id], "score": n % 2}
        report = ClientRecordDraft(
            new_record_id(), "demo", "report", time.time(), content, hashlib.sha256(record_id.encode()).hexdigest()
        )
        await store.records.append_client_record(report)
    await store.steps.commit(StepCommit("demo", 1, "training", "selected", release_id="w1", cursor=3))
    await store.tasks.add(TaskDraft("demo", "a task", {"a.py": "x = 1\n"}, protected=True))
    await store.trust.enable("demo", "judge")


async def snapshot(state: Path, url: str | None) -> dict[str, Any]:
    """What a daemon on the store would show: records in full, steps, tasks, events."""
    store = Store(state, lambda _events: None, score_scale=SCALE, url=url)  # type: ignore[arg-type]
    store.open(asyncio.get_running_loop())
    try:
        from reef_daemon.store import RecordQuery

        page = await store.records.list(RecordQuery(limit=500))
        return {
            "records": [await store.records.get(row["id"]) for row in page["records"]],
            "steps": await store.steps.history("demo"),
            "tasks": await store.tasks.list("demo"),
            "events": [(e.type, e.sequence) for e in await store.events.after(0, None)],
            "scenarios": [s.to_json() for s in store.scenarios.all()],
            "sources": await store.trust.agreements(),
        }
    finally:
        await asyncio.to_thread(store.close)


async def made(state: Path, conversations: int = 5) -> Path:
    store = Store(state, lambda _events: None, score_scale=SCALE)  # type: ignore[arg-type]
    store.open(asyncio.get_running_loop())
    await fill(store, conversations)
    await asyncio.to_thread(store.close)
    return state / "reef.sqlite3"


async def test_a_store_moves_to_postgres_and_back_as_it_was(tmp_path: Path, postgres_url: str) -> None:
    sqlite = await made(tmp_path / "a")
    before = await snapshot(tmp_path / "a", None)
    outcomes = await asyncio.to_thread(copy_store, f"sqlite:{sqlite}", postgres_url)
    assert {o.table: o.copied for o in outcomes}["records"] == 10 and all(o.complete for o in outcomes)
    assert await snapshot(tmp_path / "unused", postgres_url) == before

    again = await asyncio.to_thread(copy_store, f"sqlite:{sqlite}", postgres_url)
    assert sum(o.copied for o in again) == 0  # idempotent: nothing twice

    back = tmp_path / "b" / "reef.sqlite3"
    await asyncio.to_thread(copy_store, postgres_url, f"sqlite:{back}")
    assert await snapshot(tmp_path / "b", None) == before


async def test_an_interrupted_copy_resumes_and_counts_are_checked(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sqlite = await made(tmp_path / "a", conversations=6)
    monkeypatch.setattr(store_copy, "BATCH", 4)

    def interrupt(table: str, done: int, total: int) -> None:
        if table == "records" and done >= 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        await asyncio.to_thread(copy_store, f"sqlite:{sqlite}", postgres_url, interrupt)
    runner = CliRunner()
    result = await asyncio.to_thread(
        runner.invoke, app, ["store", "copy", "--from", f"sqlite:{sqlite}", "--to", postgres_url, "--json"]
    )
    assert result.exit_code == 0, result.output
    tables = {t["table"]: t for t in json.loads(result.stdout)["tables"]}
    assert tables["records"] == {"table": "records", "source": 12, "copied": 8, "destination": 12}
    assert await snapshot(tmp_path / "unused", postgres_url) == await snapshot(tmp_path / "a", None)

    refused = await asyncio.to_thread(
        runner.invoke, app, ["store", "copy", "--from", f"sqlite:{tmp_path / 'none.sqlite3'}", "--to", postgres_url]
    )
    assert refused.exit_code == 1 and "there is no store at" in refused.output
