"""`reef scenarios`: list, create, archive."""

from __future__ import annotations

import json
from collections.abc import Callable

from typer.testing import Result

from tests.support.cli_testing import Daemon

Cli = Callable[..., Result]


def test_scenarios_list_create_and_archive(daemon: Daemon, cli: Cli) -> None:
    daemon.chat("counted")
    created = cli("scenarios", "create", "fresh", "--training-mode", "manual")
    assert created.exit_code == 0, created.output
    assert "created scenario fresh" in created.stdout and "manual" in created.stdout
    assert "already exists" in cli("scenarios", "create", "fresh").stdout

    table = cli("scenarios")
    assert table.exit_code == 0 and "fresh" in table.stdout and "counted" in table.stdout
    rows = {row["scenario"]: row for row in json.loads(cli("scenarios", "--json").stdout)["scenarios"]}
    assert rows["counted"]["records"] == 1 and rows["fresh"]["training_mode"] == "manual"

    archived = cli("scenarios", "archive", "fresh")
    assert archived.exit_code == 0, archived.output
    assert "fresh.archived-" in archived.stdout
    names = [row["scenario"] for row in json.loads(cli("scenarios", "--json").stdout)["scenarios"]]
    assert "fresh" not in names

    missing = cli("scenarios", "archive", "never-was")
    assert missing.exit_code == 2 and missing.stderr.startswith("reef: no scenario named")
    bad = cli("scenarios", "create", "../etc")
    assert bad.exit_code == 1 and "scenario names are" in bad.stderr


def test_daemon_options_before_the_subcommand_apply_to_it(daemon: Daemon, cli: Cli) -> None:
    result = cli("scenarios", "--url", daemon.url, "create", "from-parent", env={"REEF_URL": "http://127.0.0.1:9"})
    assert result.exit_code == 0, result.output
    assert "created scenario from-parent" in result.stdout
