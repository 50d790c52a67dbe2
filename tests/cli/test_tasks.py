"""`reef tasks`: add (with a folder as its fixture), list as a table or JSON, remove; bad input refused with the field
named and nothing stored; replays of low-scored conversations listed as such, promoted or dismissed."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from typer.testing import Result

from reef_contract import TASK_PAGE_DEFAULT
from tests.support.cli_testing import Daemon

Cli = Callable[..., Result]


def listed(cli: Cli, scenario: str) -> dict[str, Any]:
    result = cli("tasks", "list", "--scenario", scenario, "--json")
    assert result.exit_code == 0, result.output
    body: dict[str, Any] = json.loads(result.stdout)
    return body


def low_scored(daemon: Daemon, scenario: str, question: str) -> str:
    receipt = daemon.chat(scenario, question)
    daemon.post("/reef/report", {"references": [receipt], "score": 0.0}, scenario)
    return receipt


def test_tasks_add_list_and_remove(daemon: Daemon, cli: Cli, tmp_path: Path) -> None:
    daemon.post("/reef/scenarios", {"name": "crud"})
    workspace = tmp_path / "workspace"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("print('hi')\n")
    (workspace / "README.md").write_text("# app\n")

    added = cli(
        "tasks", "add", "Add a --verbose flag", "--scenario", "crud", "--regex", "verbose", "--fixture",
        str(workspace), "--protected", "--json",
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    task = json.loads(added.stdout)
    assert task["protected"] is True and task["regex"] == "verbose"
    assert task["fixture"] == {"README.md": "# app\n", "src/app.py": "print('hi')\n"}
    plain = cli("tasks", "add", "Explain the design", "-s", "crud", "--judge", "Is it clear?")
    assert plain.exit_code == 0, plain.output
    assert plain.stdout.startswith("added task t-") and "judge: Is it clear?" in plain.stdout

    assert [t["prompt"] for t in listed(cli, "crud")["tasks"]] == ["Add a --verbose flag", "Explain the design"]
    table = cli("tasks", "list", "--scenario", "crud")
    assert table.exit_code == 0, table.output
    assert task["id"] in table.stdout and "protected task" in table.stdout and "regex /verbose/" in table.stdout

    removed = cli("tasks", "remove", task["id"], "--scenario", "crud")
    assert removed.exit_code == 0 and f"removed protected task {task['id']}" in removed.stdout
    assert [t["prompt"] for t in listed(cli, "crud")["tasks"]] == ["Explain the design"]
    again = cli("tasks", "remove", task["id"], "--scenario", "crud")
    assert again.exit_code == 1 and task["id"] in again.stderr


def test_bad_input_is_refused_with_the_field_named(daemon: Daemon, cli: Cli, tmp_path: Path) -> None:
    daemon.post("/reef/scenarios", {"name": "refusals"})
    binary = tmp_path / "binary"
    binary.mkdir()
    (binary / "blob.bin").write_bytes(b"\xff\xfe\x00")
    for args, field in (
        (("ask", "--regex", "(unclosed"), "regex:"),
        (("ask", "--regex", "a", "--judge", "b"), "judge:"),
        (("   ",), "prompt:"),
        (("ask", "--fixture", str(tmp_path / "missing")), "--fixture:"),
        (("ask", "--fixture", str(binary)), "--fixture: blob.bin is not UTF-8 text"),
    ):
        result = cli("tasks", "add", *args, "--scenario", "refusals")
        assert result.exit_code != 0, args
        assert field in result.stderr, result.stderr
    assert listed(cli, "refusals")["tasks"] == []
    unknown = cli("tasks", "list", "--scenario", "never-made")
    assert unknown.exit_code == 2 and "no scenario named 'never-made'" in unknown.stderr


def test_replays_are_listed_promoted_and_dismissed(daemon: Daemon, cli: Cli) -> None:
    promoted = low_scored(daemon, "replaying", "Make the build pass")
    dismissed = low_scored(daemon, "replaying", "Tidy the imports")

    body = listed(cli, "replaying")
    assert body["tasks"] == []
    assert [r["id"] for r in body["replays"]] == [f"r-{dismissed}", f"r-{promoted}"]
    assert all(r["kind"] == "replay" for r in body["replays"])
    table = cli("tasks", "list", "--scenario", "replaying")
    assert f"r-{promoted}" in table.stdout and "replay" in table.stdout and "Make the build pass" in table.stdout

    result = cli("tasks", "promote", f"r-{promoted}", "--scenario", "replaying")
    assert result.exit_code == 0, result.output
    assert f"promoted r-{promoted} to protected task t-" in result.stdout
    result = cli("tasks", "dismiss", f"r-{dismissed}", "--scenario", "replaying", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["dismissed"] is True

    body = listed(cli, "replaying")
    assert body["replays"] == []
    (task,) = body["tasks"]
    assert task["protected"] and task["prompt"] == "Make the build pass" and task["source_record"] == promoted


def test_a_fixture_holding_a_pipe_is_refused_without_reading_it(daemon: Daemon, cli: Cli, tmp_path: Path) -> None:
    daemon.post("/reef/scenarios", {"name": "piped"})
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "a.txt").write_text("fine\n")
    os.mkfifo(workspace / "pipe")
    done = threading.Event()
    feeder = threading.Thread(target=_feed_once, args=(workspace / "pipe", done), daemon=True)
    feeder.start()  # a reader that opens the pipe gets a line (and would otherwise wait for one for ever)
    try:
        added = cli("tasks", "add", "p", "--scenario", "piped", "--fixture", str(workspace))
    finally:
        done.set()
        feeder.join(5)
    assert added.exit_code == 2, added.output
    assert "--fixture: pipe is not a regular file (a pipe, socket or device)" in added.stderr
    assert listed(cli, "piped")["tasks"] == []


def _feed_once(pipe: Path, done: threading.Event) -> None:
    while not done.is_set():
        try:
            writer = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # no reader yet
            time.sleep(0.01)
            continue
        os.write(writer, b"from the pipe\n")
        os.close(writer)
        return


def test_tasks_list_shows_every_page(daemon: Daemon, cli: Cli) -> None:
    daemon.post("/reef/scenarios", {"name": "paged"})
    prompts = [f"task {n}" for n in range(TASK_PAGE_DEFAULT + 3)]
    for prompt in prompts:
        daemon.post("/reef/scenarios/paged/tasks", {"prompt": prompt})
    assert [t["prompt"] for t in listed(cli, "paged")["tasks"]] == prompts
