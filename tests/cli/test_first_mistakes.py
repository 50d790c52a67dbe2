"""The mistakes of a first hour are answered with what to do: a scenario typed wrong is named with the closest one
(exit 2) by every command that reads a scenario, instead of "no records match"; an export into a folder that is
missing says so."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from typer.testing import Result

from tests.support.cli_testing import Daemon

Cli = Callable[..., Result]

TYPO_COMMANDS = {
    "records": ["records", "--scenario", "demoo"],
    "score --next": ["score", "--next", "--scenario", "demoo"],
    "export": ["export", "--scenario", "demoo"],
    "versions": ["versions", "--scenario", "demoo"],
    "promote": ["promote", "v1", "--scenario", "demoo"],
    "rollback": ["rollback", "--scenario", "demoo"],
    "tasks list": ["tasks", "list", "--scenario", "demoo"],
    "request": ["request", "be brief", "--scenario", "demoo"],
    "scenarios archive": ["scenarios", "archive", "demoo"],
    "scenarios move": ["scenarios", "move", "demoo"],
}


@pytest.mark.parametrize("args", TYPO_COMMANDS.values(), ids=TYPO_COMMANDS.keys())
def test_a_scenario_typed_wrong_is_named_with_the_closest_one(daemon: Daemon, cli: Cli, args: list[str]) -> None:
    daemon.chat("demo")
    result = cli(*args)
    assert result.exit_code == 2, result.output
    assert "no scenario named 'demoo' (did you mean demo?)" in result.output
    assert "no records match" not in result.output and "Traceback" not in result.output


def test_a_scenario_far_from_any_lists_them(daemon: Daemon, cli: Cli) -> None:
    daemon.chat("demo")
    result = cli("records", "--scenario", "zzzzzz")
    assert result.exit_code == 2, result.output
    assert "no scenario named 'zzzzzz'; the scenarios are " in result.output and "demo" in result.output


def test_the_tui_refuses_a_scenario_typed_wrong_before_it_opens(daemon: Daemon, cli: Cli) -> None:
    daemon.chat("demo")
    result = cli("tui", "--scenario", "demoo")
    assert result.exit_code == 2, result.output
    assert "did you mean demo?" in result.output


def test_export_into_a_folder_that_is_missing_says_so(daemon: Daemon, cli: Cli, tmp_path: Path) -> None:
    daemon.chat("demo")
    missing = tmp_path / "missing" / "train.jsonl"
    result = cli("export", "--scenario", "demo", "-o", str(missing))
    assert result.exit_code == 2, result.output
    assert f"cannot export there: there is no folder {missing.parent}" in result.output
    assert "Traceback" not in result.output and not missing.parent.exists()
    folder = cli("export", "--scenario", "demo", "-o", str(tmp_path))
    assert folder.exit_code == 2 and "is a folder; name a file in it" in folder.output


@pytest.mark.parametrize("given", ["{url}/v1", "{url}/v1/"])
def test_a_url_with_the_sdks_v1_is_told_to_drop_it(daemon: Daemon, cli: Cli, given: str) -> None:
    result = cli("status", "--url", given.format(url=daemon.url))
    assert result.exit_code == 2, result.output
    assert "--url is the daemon's address without /v1" in result.output and f"use {daemon.url}" in result.output
    environment = cli("status", env={"REEF_URL": f"{daemon.url}/v1"})
    assert environment.exit_code == 2 and "REEF_URL is the daemon's address without /v1" in environment.output


def test_a_route_under_v1_that_is_reefs_own_is_told_to_drop_it_and_pointed_at_the_reference(daemon: Daemon) -> None:
    answer = httpx.get(f"{daemon.url}/v1/reef/status", timeout=30).json()["error"]["message"]
    assert answer == (
        "no route GET /v1/reef/status; reef's own routes have no /v1 prefix: /reef/status; "
        "docs/api.md lists the routes reef serves"
    )
    assert (Path(__file__).parents[2] / "docs" / "api.md").is_file()
    other = httpx.get(f"{daemon.url}/reef/nothing", timeout=30).json()["error"]["message"]
    assert other == "no route GET /reef/nothing; docs/api.md lists the routes reef serves"


def test_requests_without_an_id_lists_them(daemon: Daemon, cli: Cli) -> None:
    daemon.chat("demo")
    listed = cli("requests", "--scenario", "demo")
    assert listed.exit_code == 0, listed.output
    assert "no requests yet: file one with `reef request TEXT --scenario NAME`" in listed.output
    assert cli("requests", "--scenario", "demo", "--json").stdout == ""
    typo = cli("requests", "--scenario", "demoo")
    assert typo.exit_code == 2 and "did you mean demo?" in typo.output


def test_the_list_of_requests_names_each_with_its_state_version_and_words(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from reef_cli.commands.requests import _list
    from tests.support.tui_fixed import PROGRESS, FixedClient

    monkeypatch.setenv("COLUMNS", "200")
    _list(FixedClient(), None, json=False)
    shown = capsys.readouterr().out
    for progress in PROGRESS.values():
        line = next(line for line in shown.splitlines() if progress["id"] in line)
        assert progress["result"] in line and progress["version"] in line and progress["text"] in line
