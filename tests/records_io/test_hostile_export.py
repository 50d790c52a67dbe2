"""Odd records and odd requests against export: a record of any stored shape is rendered (or left out) without
ending the export early, a failure part way is a broken body and `reef export` exit 1 with no file, cut answers
stay out unless asked for, and pages are bounded by bytes, not only rows."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.client_exceptions import ClientConnectionResetError
from typer.testing import CliRunner

from reef_cli.app import app
from reef_contract import CHAT_ROUTE
from reef_daemon.ids import new_record_id
from reef_daemon.records import InferenceDraft
from reef_daemon.store.exports import ExportReader
from tests.support.records_io_testing import InProcessReef

ODD_REQUESTS: list[tuple[str, dict[str, Any]]] = [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "first"}]}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "calls"},
                                           {"role": "assistant", "content": "x", "tool_calls": True},
                                           {"role": "user", "content": "then"}]}),
    ("/v1/responses", {"input": [{"type": "message", "role": {}, "content": "a role object"},
                                 {"type": "message", "role": "user", "content": "second"}]}),
    ("/v1/chat/completions", {"messages": 5}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "last"}]}),
]  # fmt: skip


async def test_odd_requests_are_exported_flattened_not_cut_short(reef: InProcessReef) -> None:
    for route, body in ODD_REQUESTS:
        response = await reef.client.post(route, json={"model": "m", **body}, headers={"x-reef-scenario": "odd"})
        assert response.status_code == 200, response.text
    lines = await reef.export("odd")
    assert [line["messages"][0]["content"] if len(line["messages"]) > 1 else None for line in lines] == [
        "first", "calls", "second", None, "last"
    ]  # fmt: skip
    assert lines[1]["messages"][1] == {"role": "assistant", "content": "x"}  # `tool_calls: true` is no call


async def test_a_record_that_cannot_be_rendered_is_left_out_and_logged(
    reef: InProcessReef, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ids = [await _append(reef, "skip", f"q{i}") for i in range(3)]
    real = ExportReader.page

    async def page(self: ExportReader, *args: Any) -> Any:
        rows = await real(self, *args)
        return [row if row.id != ids[1] else _Unreadable(row) for row in rows]

    monkeypatch.setattr(ExportReader, "page", page)
    with caplog.at_level(logging.WARNING, logger="reef.export"):
        lines = await reef.export("skip")
    assert [line["messages"][0]["content"] for line in lines] == ["q0", "q2"]
    assert f"record {ids[1]} cannot be rendered" in caplog.text
    assert "left out 1 record(s)" in caplog.text


async def test_an_export_that_fails_part_way_is_a_broken_body_and_reef_export_exit_1_without_a_file(
    reef: InProcessReef, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for i in range(4):
        await _append(reef, "broken", f"q{i}")
    monkeypatch.setattr("reef_daemon.store.exports.PAGE", 1)
    real = ExportReader.page
    calls = 0

    async def page(self: ExportReader, *args: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError("disk I/O error")
        return await real(self, *args)

    monkeypatch.setattr(ExportReader, "page", page)
    url = str(reef.client.base_url)
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "train.jsonl"
    done = await asyncio.to_thread(
        CliRunner().invoke, app, ["export", "--scenario", "broken", "-o", str(target), "--url", url]
    )
    assert done.exit_code == 1, done.output
    assert "the export broke off before its end" in done.output
    assert list((tmp_path / "out").iterdir()) == []  # neither the file nor its partial


async def test_cut_answers_are_left_out_unless_asked_for_and_then_marked(reef: InProcessReef) -> None:
    await _append(reef, "cut", "whole")
    await _append(reef, "cut", "cut short", complete=False)
    assert [line["messages"][0]["content"] for line in await reef.export("cut")] == ["whole"]
    both = await reef.export("cut", include_cut="true")
    assert [(line["messages"][0]["content"], line.get("complete")) for line in both] == [
        ("whole", None), ("cut short", False)
    ]  # fmt: skip
    response = await reef.client.get("/reef/export", params={"scenario": "cut", "include_cut": "maybe"})
    assert response.status_code == 400 and "include_cut must be true or false" in response.text


async def test_pages_are_bounded_by_bytes(reef: InProcessReef, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(6):
        await _append(reef, "big", f"q{i}", size=300_000)
    seen: list[int] = []
    real = ExportReader.page

    async def page(self: ExportReader, query: Any, after: int, max_bytes: int) -> Any:
        rows = await real(self, query, after, max_bytes)
        seen.append(len(rows))
        return rows

    monkeypatch.setattr(ExportReader, "page", page)
    settings = reef.daemon.settings
    monkeypatch.setattr(reef.daemon, "settings", replace(settings, reef=replace(settings.reef, export_page_mb=0.5)))
    lines = await reef.export("big")
    assert [line["messages"][0]["content"] for line in lines] == [f"q{i}" for i in range(6)]
    assert seen == [2, 2, 2, 0]  # 300 kB records, a 0.5 MiB page: the second record of each fills it


@pytest.mark.parametrize(
    ("params", "status", "words"),
    [
        ({"scenario": "present", "since": "nan"}, 400, "since must be a date"),
        ({"scenario": "present", "since": "inf"}, 400, "since must be a date"),
        ({"scenario": "nowhere"}, 404, "no scenario named 'nowhere'"),
    ],
)
async def test_odd_export_queries(reef: InProcessReef, params: dict[str, str], status: int, words: str) -> None:
    await _append(reef, "present", "q")
    response = await reef.client.get("/reef/export", params=params)
    assert response.status_code == status and words in response.json()["error"]["message"]


async def test_a_client_leaving_an_export_logs_no_traceback(
    reef: InProcessReef, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for i in range(3):
        await _append(reef, "leave", f"q{i}")
    real = web.StreamResponse.write
    writes = 0

    async def write(self: web.StreamResponse, data: bytes) -> None:
        nonlocal writes
        writes += 1
        if writes == 2:  # what aiohttp raises when the reader has gone
            raise ClientConnectionResetError("Cannot write to closing transport")
        await real(self, data)

    monkeypatch.setattr(web.StreamResponse, "write", write)
    with caplog.at_level(logging.INFO), caplog.at_level(logging.INFO, logger="reef.export"):
        await reef.client.get("/reef/export", params={"scenario": "leave"})
    assert "export of leave as openai: the client left before its end" in caplog.text
    assert [record.getMessage() for record in caplog.records if record.exc_info] == []


class _Unreadable:
    """A stored row whose bodies cannot be decoded."""

    def __init__(self, row: Any) -> None:
        self.id, self.sequence, self.score, self.size = row.id, row.sequence, row.score, row.size

    def decoded(self) -> Any:
        raise TypeError("'bool' object is not iterable")


async def _append(reef: InProcessReef, scenario: str, question: str, *, complete: bool = True, size: int = 0) -> str:
    await reef.daemon.ensure_scenario(scenario)
    request = {"model": "m", "messages": [{"role": "user", "content": question}]}
    response = {"model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "a" * size or "x"},
                                           "finish_reason": "stop" if complete else None}]}  # fmt: skip
    draft = InferenceDraft(
        id=new_record_id(), scenario=scenario, route=CHAT_ROUTE, created_at=time.time(), model="m",
        request=json.dumps(request).encode(), status=200, response=json.dumps(response).encode(), stream=False,
        complete=complete, error=None, ttft_ms=1.0, duration_ms=2.0, overhead_ms=0.1,
    )  # fmt: skip
    row = await reef.daemon.store.records.append_inference(draft)
    return str(row["id"])
