"""`reef store copy`: a deployment's store moves from SQLite to PostgreSQL and back with every record, report, score,
step, task and event as it was; into a store in use every record keeps its scores and their sources beside the
destination's own; a second run adds nothing; an interrupted copy resumes; every row is checked at the end."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from reef_cli.app import app
from reef_contract import CHAT_ROUTE
from reef_daemon.ids import new_record_id
from reef_daemon.records import ClientRecordDraft, InferenceDraft
from reef_daemon.store import Event, RecordQuery, StepCommit, Store, TaskDraft
from reef_daemon.store.engines import copy as store_copy
from reef_daemon.store.engines.copy import copy_store
from tests.support.waiting import eventually

SCALE = {"min": 0.0, "max": 1.0}


async def fill(store: Store, conversations: int) -> None:
    await converse(store, conversations)
    await store.steps.commit(StepCommit("demo", 1, "training", "selected", release_id="w1", cursor=3))
    await store.tasks.add(TaskDraft("demo", "a task", {"a.py": "x = 1\n"}, protected=True))
    await store.trust.enable("demo", "judge")


async def converse(store: Store, conversations: int) -> None:
    """Exchanges, each scored by a person: 0 and 1 in turn."""
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


def heard_of(event: Event, record_id: str) -> bool:
    record = dict(event.data).get("record")
    return isinstance(record, dict) and record.get("id") == record_id


async def snapshot(state: Path, url: str | None) -> dict[str, Any]:
    """What a daemon on the store would show: records in full, steps, tasks, events."""
    store = Store(state, lambda _events: None, score_scale=SCALE, url=url)  # type: ignore[arg-type]
    store.open(asyncio.get_running_loop())
    try:
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
    assert tables["records"] == {"table": "records", "source": 12, "copied": 8, "present": 12}
    assert await snapshot(tmp_path / "unused", postgres_url) == await snapshot(tmp_path / "a", None)

    refused = await asyncio.to_thread(
        runner.invoke, app, ["store", "copy", "--from", f"sqlite:{tmp_path / 'none.sqlite3'}", "--to", postgres_url]
    )
    assert refused.exit_code == 1 and "there is no store at" in refused.output


async def test_a_copy_into_a_store_in_use_keeps_every_record_with_its_scores(tmp_path: Path, postgres_url: str) -> None:
    """README's order: the team's daemons already record into the destination, so the source's sequence numbers are
    taken there, and they go on recording while the copy runs."""
    sqlite = await made(tmp_path / "a", conversations=26)
    before = await snapshot(tmp_path / "a", None)
    heard: list[Event] = []
    team = Store(tmp_path / "team", heard.extend, score_scale=SCALE, url=postgres_url)  # type: ignore[arg-type]
    team.open(asyncio.get_running_loop())
    try:
        await converse(team, 10)
        scenario = team.scenarios.get("demo")
        ours = (await team.records.list(RecordQuery(limit=500)))["records"]
        copying = asyncio.create_task(
            asyncio.to_thread(
                CliRunner().invoke, app, ["store", "copy", "--from", f"sqlite:{sqlite}", "--to", postgres_url, "--json"]
            )
        )
        while not copying.done():  # the team records meanwhile
            await converse(team, 1)
        result = await copying
        assert result.exit_code == 0, result.output
        tables = {t["table"]: t for t in json.loads(result.stdout)["tables"]}
        assert tables["records"]["present"] == tables["records"]["source"] == 52
        assert tables["record_scores"]["present"] == tables["record_scores"]["source"] == 26

        last = max(before["records"], key=lambda r: r["sequence"])["id"]  # heard of last: the copy's news is in
        await eventually(lambda: any(heard_of(e, last) for e in heard), 30, "the copy's news")
        assert team.scenarios.get("demo") == scenario  # "demo" is the team's, as it was: not the source's

        for record in before["records"]:  # every receipt, its score and who gave it
            copied = await team.records.get(record["id"])
            assert {**copied, "sequence": None} == {**record, "sequence": None}
        for row in ours:
            await team.records.get(row["id"])  # the team's own stay
        # Its reports, numbered below the copied ones, still wait for a recipe: the read position is not past them.
        waiting = await team.steps.pending("demo", await team.steps.cursor("demo"), ("report",), limit=500)
        assert {row["id"] for row in ours if row["type"] == "report"} <= {row["id"] for row in waiting}

        # A person scored this exchange 0: a judge's later report does not replace that.
        zero = next(r for r in before["records"] if r["type"] == "inference" and r["score"] == 0)
        judged = ClientRecordDraft(
            new_record_id(), "demo", "report", time.time(), {"references": [zero["id"]], "score": 1}, "j", "judge"
        )
        await team.records.append_client_record(judged)
        after = await team.records.get(zero["id"])
        assert (after["score"], after["source"]) == (0, "person")
    finally:
        await asyncio.to_thread(team.close)


async def test_a_scenario_trained_in_both_stores_refuses_the_copy(tmp_path: Path, postgres_url: str) -> None:
    sqlite = await made(tmp_path / "a")
    team = Store(tmp_path / "team", lambda _events: None, score_scale=SCALE, url=postgres_url)  # type: ignore[arg-type]
    team.open(asyncio.get_running_loop())
    try:
        await fill(team, 2)  # its own step 1 of "demo"
        result = await asyncio.to_thread(
            CliRunner().invoke, app, ["store", "copy", "--from", f"sqlite:{sqlite}", "--to", postgres_url]
        )
        assert result.exit_code == 1 and "both stores hold steps with scenario 'demo', step 1" in result.output
        assert len((await team.records.list(RecordQuery(limit=500)))["records"]) == 4  # nothing was written
    finally:
        await asyncio.to_thread(team.close)


async def test_a_sqlite_store_its_daemon_has_open_refuses_the_copy(tmp_path: Path, postgres_url: str) -> None:
    """Its writer counts the sequence itself: a copy run meanwhile (`reef store copy`, a process of its own) would
    take the numbers the daemon writes next."""
    source = Store(tmp_path / "pg", lambda _events: None, score_scale=SCALE, url=postgres_url)  # type: ignore[arg-type]
    source.open(asyncio.get_running_loop())
    await converse(source, 2)
    await asyncio.to_thread(source.close)
    daemon = Store(tmp_path / "b", lambda _events: None, score_scale=SCALE)  # type: ignore[arg-type]
    daemon.open(asyncio.get_running_loop())
    try:
        await converse(daemon, 1)
        command = [sys.executable, "-m", "reef_cli", "store", "copy", "--from", postgres_url, "--to"]
        refused = await asyncio.to_thread(
            subprocess.run, [*command, f"sqlite:{tmp_path / 'b' / 'reef.sqlite3'}"], capture_output=True, text=True
        )
        assert refused.returncode == 1 and "is open in another process (its daemon?)" in refused.stderr
        assert len((await daemon.records.list(RecordQuery(limit=500)))["records"]) == 2  # nothing was written
    finally:
        await asyncio.to_thread(daemon.close)
    stopped = await asyncio.to_thread(
        subprocess.run, [*command, f"sqlite:{tmp_path / 'b' / 'reef.sqlite3'}"], capture_output=True, text=True
    )
    assert stopped.returncode == 0, stopped.stderr
