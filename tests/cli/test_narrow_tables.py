"""Tables at 80 columns: what a user copies from them (a request's id, a scenario's name, a version) is shown
whole; what is too long for its column wraps or folds onto more lines instead of ending in an ellipsis."""

from __future__ import annotations

import io

from rich.console import Console, RenderableType

from reef_cli.commands.requests import requests_table
from reef_cli.render.status import scenarios_table, status_view
from reef_client import RequestProgress, ScenarioRow, Status
from reef_client.render.source_trust import sources_table

NAME = "coding-assistant-for-the-payments-service"  # longer than any column an 80-column table can give it
RECEIPT = "0b5e7c2a9d4f4e1c8a3b6d2f7e9c1a40"
ASKED = "make the answers shorter and always cite the file that was changed"


def at_80(renderable: RenderableType) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=80).print(renderable)
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert not any("…" in line for line in lines), "\n".join(lines)
    return lines


def first_column(lines: list[str]) -> str:
    """The text of a bordered table's first column, its lines joined."""
    return "".join(line.split("│")[1].strip() for line in lines if line.startswith("│"))


def test_a_long_scenario_name_folds_in_reef_scenarios_and_reef_status() -> None:
    row: ScenarioRow = {"scenario": NAME, "recipe": "record", "training_mode": "auto", "created_at": 0.0,
                        "records": 3, "reports": 1, "unscored": 2, "current_release": "v12"}  # fmt: skip
    listed = at_80(scenarios_table([row]))
    assert first_column(listed) == NAME and "v12" in "".join(listed)
    counts = {"recipe": "record", "training_mode": "auto", "records": 3, "reports": 1, "unscored": 2}
    status: Status = {"version": "0.1.0", "scenarios": {NAME: counts}}  # type: ignore[typeddict-item]
    shown = at_80(status_view(status, "http://127.0.0.1:8900"))
    assert first_column(shown) == NAME


def test_a_long_scenario_name_folds_in_the_sources_table() -> None:
    table = sources_table({NAME: {"next-turn": {"shared": 40, "kappa": 0.1, "counts": False, "reason": "κ < 0.2"}}})
    assert table is not None
    assert first_column(at_80(table)) == NAME


def test_reef_requests_shows_each_id_whole_and_wraps_the_request() -> None:
    progress: RequestProgress = {"id": RECEIPT, "scenario": NAME, "text": ASKED, "session": None,
                                 "created_at": 1.76e9, "state": "settled", "activity": [], "design": None,
                                 "result": "published", "version": "v12"}  # fmt: skip
    lines = at_80(requests_table([progress]))
    assert RECEIPT in lines[1] and "published" in lines[1] and "v12" in lines[1]
    words = " ".join(" ".join(lines[1:]).split())
    assert all(word in words.split() for word in ASKED.split())
