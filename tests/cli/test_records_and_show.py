"""`reef records` (table, JSON lines, filters, --follow as a live subprocess) and `reef show`."""

from __future__ import annotations

import io
import itertools
import json
import queue
import signal
import subprocess
import threading
from collections.abc import Callable
from typing import IO

import httpx
import pytest
from rich.console import Console
from typer.testing import Result

from reef_client.render.record import record_view
from reef_tui.receipts import short
from tests.support.cli_testing import REEF, Daemon, default_sigint
from tests.support.waiting import eventually_sync

Cli = Callable[..., Result]


def test_records_lists_new_records_as_a_table_and_as_json(daemon: Daemon, cli: Cli) -> None:
    first = daemon.chat("listing")
    second = daemon.chat("listing", stream=True)
    table = cli("records", "--scenario", "listing")
    assert table.exit_code == 0, table.output
    assert first in table.stdout and second in table.stdout
    assert table.stdout.index(first) < table.stdout.index(second)  # oldest first
    for header in ("time", "scenario", "route", "model", "status", "latency", "tokens", "score"):
        assert header in table.stdout

    lines = cli("records", "--scenario", "listing", "--json").stdout.splitlines()
    rows = [json.loads(line) for line in lines]
    assert [row["id"] for row in rows] == [first, second]
    assert rows[0]["usage"] == {"input_tokens": 12, "output_tokens": 7}


def test_records_filters_by_type_unscored_and_limit(daemon: Daemon, cli: Cli) -> None:
    scored, unscored = daemon.chat("filters"), daemon.chat("filters")
    assert cli("score", scored, "1").exit_code == 0

    def ids(*args: str) -> list[str]:
        result = cli("records", "--scenario", "filters", "--json", *args)
        assert result.exit_code == 0, result.output
        return [json.loads(line)["id"] for line in result.stdout.splitlines()]

    assert ids("--unscored") == [unscored]
    assert len(ids("--type", "report")) == 1
    assert ids("--type", "inference") == [scored, unscored]
    assert ids("--limit", "1") == [ids()[-1]]
    assert cli("records", "--type", "bogus").exit_code == 2


def test_records_at_80_columns_name_the_type_of_a_report_row(daemon: Daemon, cli: Cli) -> None:
    receipt = daemon.chat("narrow")
    assert cli("score", receipt, "1").exit_code == 0
    table = cli("records", "--scenario", "narrow", env={"COLUMNS": "80"})
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    rows = [line for line in lines[1:] if line.strip()]
    assert len(rows) == 2
    # Column by column: a receipt (random hex) may hold "200" itself.
    assert receipt in rows[0] and "200" in rows[0].split()
    assert "report" in rows[1].split() and "200" not in rows[1].split()


def _reader(stream: IO[str], into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line)


def _drain(lines: queue.Queue[str], seen: list[str]) -> str:
    while not lines.empty():
        seen.append(lines.get_nowait())
    return "".join(seen)


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "table"])
def test_follow_prints_a_record_made_after_it_started(daemon: Daemon, as_json: bool) -> None:
    scenario = f"follow-{'json' if as_json else 'table'}"
    before = daemon.chat(scenario)
    command = [*REEF, "records", "--follow", "--scenario", scenario, *(["--json"] if as_json else [])]
    env = {**daemon.env, "REEF_URL": daemon.url}
    follower = subprocess.Popen(
        command,
        cwd=daemon.workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    out: queue.Queue[str] = queue.Queue()
    err: queue.Queue[str] = queue.Queue()
    readers = []
    for stream, into in ((follower.stdout, out), (follower.stderr, err)):
        assert stream is not None
        readers.append(threading.Thread(target=_reader, args=(stream, into), daemon=True))
        readers[-1].start()
    seen: list[str] = []
    try:
        eventually_sync(lambda: before in _drain(out, seen), 60, "the existing record to be listed")
        after = daemon.chat(scenario, question="made while following")
        eventually_sync(lambda: after in _drain(out, seen), 60, "the new record to be followed")
        follower.send_signal(signal.SIGINT)
        assert follower.wait(timeout=60) == 0
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
        for reader in readers:
            reader.join(timeout=30)
        for stream in (follower.stdout, follower.stderr):
            assert stream is not None
            stream.close()
    errors = _drain(err, [])
    assert "Traceback" not in errors
    text = _drain(out, seen)
    assert text.count(after) == 1
    if as_json:
        followed = [json.loads(line) for line in text.splitlines()]
        assert [row["id"] for row in followed] == [before, after]


def test_show_renders_the_exchange_of_every_route(daemon: Daemon, cli: Cli) -> None:
    for route, body in (
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Capital of *France*?"}]}),
        ("/v1/messages", {"system": "Answer briefly.", "max_tokens": 64,
                          "messages": [{"role": "user", "content": "Capital of *France*?"}]}),
        ("/v1/responses", {"instructions": "Answer briefly.", "input": "Capital of *France*?"}),
    ):  # fmt: skip
        for stream in (False, True):
            response = httpx.post(
                daemon.url + route,
                json={"model": "fake-model", "stream": stream, **body},
                headers={"x-reef-scenario": "show"},
                timeout=30,
            )
            assert response.status_code == 200
            receipt = (
                response.headers.get("x-reef-agent-record-id") or response.text.split('"agent_record_id":"')[1][:32]
            )
            shown = cli("show", receipt)
            assert shown.exit_code == 0, shown.output
            text = shown.stdout
            assert "Capital of France?" in text  # the markdown is rendered, not echoed
            assert "The capital of France is Paris." in text, (route, stream, text)
            assert receipt in text and route in text
            if stream:
                assert "streamed" in text
            if route != "/v1/chat/completions":
                assert "Answer briefly." in text


def test_show_includes_the_reports_and_json(daemon: Daemon, cli: Cli) -> None:
    receipt = daemon.chat("show-reports")
    assert cli("score", receipt, "0.25", "--feedback", "close, but verbose").exit_code == 0
    shown = cli("show", receipt)
    assert "close, but verbose" in shown.stdout and "0.25" in shown.stdout
    for fact in ("timings", "tokens", "12 in, 7 out", "serving"):
        assert fact in shown.stdout
    assert "no price for this model" in shown.stdout  # the fake model has no price, which is not $0
    record = json.loads(cli("show", receipt, "--json").stdout)
    assert record["cost_usd"] is None
    assert record["id"] == receipt
    assert record["reports"][0]["feedback"] == "close, but verbose"


def test_show_takes_the_receipt_as_the_tui_lists_it_and_names_a_prefix_of_several(daemon: Daemon, cli: Cli) -> None:
    receipts = [daemon.chat("show-prefix") for _ in range(3)]
    assert cli("score", receipts[0], "0.25", "--feedback", "found by its start").exit_code == 0
    listed = short(receipts[0])
    assert len(listed) < len(receipts[0])
    shown = cli("show", listed, "--json")
    assert shown.exit_code == 0, shown.output
    record = json.loads(shown.stdout)
    assert record["id"] == receipts[0] and record["reports"][0]["feedback"] == "found by its start"

    # Made within a second, two consecutive receipts share at least their first 8 digits (the time's high bits).
    first_eight = [receipt[:8] for receipt in receipts]
    shared = next(start for start, following in itertools.pairwise(first_eight) if start == following)
    several = cli("show", shared)
    assert several.exit_code == 1
    assert f"several records' ids start with '{shared}'" in several.stderr and several.stderr.count("\n") == 1


def test_show_of_an_unknown_receipt_is_one_line(cli: Cli) -> None:
    result = cli("show", "f" * 32)
    assert result.exit_code == 1
    assert result.stderr.startswith("reef: no record") and result.stderr.count("\n") == 1


def test_show_renders_a_streamed_tool_call_and_token_counts_not_reported() -> None:
    record = {
        "id": "d" * 32,
        "scenario": "demo",
        "type": "inference",
        "route": "/v1/chat/completions",
        "status": 200,
        "complete": True,
        "usage": {"input_tokens": None, "output_tokens": None},  # a stream asked without include_usage
        "request": {"messages": [{"role": "user", "content": "Weather in Paris?"}]},
        "response": {"stream": True, "status": 200, "complete": True, "body": "data: [DONE]\n\n"},
        "answer": {
            "model": "fake-model",
            "parts": [{"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'}],
            "finish_reason": "tool_calls",
            "usage": {"input_tokens": None, "output_tokens": None},
        },
    }
    console = Console(file=io.StringIO(), width=100)
    console.print(record_view(record))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "tokens    not reported" in text and "None in" not in text
    assert "answer (streamed" in text and "tool call: get_weather" in text and '"city": "Paris"' in text


def test_show_and_records_say_which_turn_a_derived_report_was_read_from_and_why(daemon: Daemon, cli: Cli) -> None:
    receipt = daemon.chat("derived", "Which file handles the login?")
    turn = daemon.chat("derived", "No, which file? Name it.")
    evidence = {"verdict": "corrected", "next_record": turn, "next_message": "No, which file? Name it."}
    report = daemon.post(
        "/reef/report",
        {
            "score": 0,
            "feedback": "the user asked for the file the answer left out",
            "references": [receipt],
            "source": "next-turn",
            "evidence": evidence,
        },
        scenario="derived",
    )["agent_record_id"]
    said = f'read from turn {turn} ("No, which file? Name it."), corrected: the user asked for the file the answer'

    shown = cli("show", receipt, env={"COLUMNS": "400"})
    assert shown.exit_code == 0, shown.output
    assert f"derived   {said} left out" in shown.stdout  # beside the score it explains
    assert f'turn {turn} ("No, which file? Name it."), corrected' in shown.stdout.split("reports")[-1]
    assert said in cli("show", report, env={"COLUMNS": "400"}).stdout

    listed = cli("records", "--scenario", "derived", env={"COLUMNS": "400"})
    assert listed.exit_code == 0, listed.output
    lines = listed.stdout.splitlines()
    row = next(index for index, line in enumerate(lines) if line.startswith(report))
    assert lines[row + 1] == f"  ↳ {said} left out"
    assert lines[row + 1 :] == [lines[row + 1]]  # the last row: nothing below the note
