"""`x` on the records screen exports the list's scenario to a file, against a real daemon: the file holds what
`reef export` writes, the toast says how many records and where; a path that cannot be written is refused in the
dialog; an export with nothing in it writes no file and says why; the list of every scenario asks which one. At
80 columns the key works (and the palette offers it) though the footer keeps its room for `q Quit` and
`s Scenario`."""

from __future__ import annotations

import json
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Input, Select
from textual.widgets._footer import FooterKey

from reef_client import ReefClient
from reef_tui import ReefApp
from reef_tui.screens.export import ExportScreen
from reef_tui.widgets.record_list import RecordList
from tests.support.tui_testing import Daemon
from tests.support.waiting import eventually


def started(daemon: Daemon, scenario: str | None = "demo") -> tuple[ReefApp, list[str]]:
    """The app on `daemon`, and every toast it shows."""
    app = ReefApp(daemon.url, scenario=scenario)
    said: list[str] = []
    notify = app.notify
    app.notify = lambda message, **kw: (said.append(str(message)), notify(message, **kw))[1]  # type: ignore[method-assign]
    return app, said


async def open_dialog(app: ReefApp, pilot: Pilot[None]) -> ExportScreen:
    records = app.screen.query_one(RecordList)
    await eventually(lambda: app.connected and records.rows, 60, "the records listed", pause=pilot.pause)
    await pilot.press("x")
    return await eventually(
        lambda: app.screen if isinstance(app.screen, ExportScreen) else None, 60, "the export dialog", pause=pilot.pause
    )


async def fill(dialog: ExportScreen, pilot: Pilot[None], file: Path | str, min_score: str = "") -> None:
    """Type the file and the least score, then enter."""
    dialog.query_one("#export-file", Input).value = str(file)
    dialog.query_one("#export-min-score", Input).value = min_score
    dialog.query_one("#export-file", Input).focus()
    await pilot.press("enter")


def exported_by_the_cli(daemon: Daemon, scenario: str, min_score: float | None = None) -> list[str]:
    """The lines `reef export` writes for `scenario` as openai."""
    with ReefClient(daemon.url) as client, client.export(scenario, min_score=min_score) as stream:
        return list(stream.lines)


async def test_x_writes_the_scenarios_records_as_reef_export_does(daemon: Daemon, tmp_path: Path) -> None:
    asked = [daemon.chat(question=f"question {n}") for n in range(3)]
    daemon.chat(scenario="elsewhere")
    target = tmp_path / "train.jsonl"
    app, said = started(daemon)
    async with app.run_test(size=(120, 30)) as pilot:
        dialog = await open_dialog(app, pilot)
        await fill(dialog, pilot, target)
        done = await eventually(
            lambda: next((line for line in said if line.startswith("exported")), None), 60, "the export's toast",
            pause=pilot.pause,
        )  # fmt: skip
    lines = target.read_text().splitlines()
    assert lines == exported_by_the_cli(daemon, "demo")
    assert len(lines) >= len(asked)
    assert done == f"exported {len(lines)} records to {target}"
    assert not target.with_name("train.jsonl.partial").exists()
    first = json.loads(lines[0])
    assert first["messages"][0]["role"] == "user"


async def test_the_least_score_and_the_format_reach_the_export(daemon: Daemon, tmp_path: Path) -> None:
    good, poor = daemon.chat(question="scored well"), daemon.chat(question="scored poorly")
    with ReefClient(daemon.url) as client:
        client.report("demo", [good], score=0.9)
        client.report("demo", [poor], score=0.1)
    target = tmp_path / "good.jsonl"
    app, said = started(daemon)
    async with app.run_test(size=(120, 30)) as pilot:
        dialog = await open_dialog(app, pilot)
        await fill(dialog, pilot, target, min_score="0.5")
        await eventually(lambda: any(line.startswith("exported") for line in said), 60, "the toast", pause=pilot.pause)
    lines = target.read_text().splitlines()
    assert lines == exported_by_the_cli(daemon, "demo", min_score=0.5)
    assert all(json.loads(line)["score"] >= 0.5 for line in lines)
    assert any("scored well" in line for line in lines) and not any("scored poorly" in line for line in lines)


async def test_nothing_to_export_writes_no_file_and_says_why(daemon: Daemon, tmp_path: Path) -> None:
    daemon.chat()  # proxied to an HTTP model: no tokens recorded
    target = tmp_path / "tokens.jsonl"
    app, said = started(daemon)
    async with app.run_test(size=(120, 30)) as pilot:
        dialog = await open_dialog(app, pilot)
        dialog.query_one("#export-format").focus()
        await pilot.press("down", "down", "enter")  # the third format: tokens
        assert dialog.query_one("#export-file", Input).value == "demo-tokens.jsonl"
        await fill(dialog, pilot, target)
        sentence = await eventually(
            lambda: next((line for line in said if line.startswith("nothing")), None), 60, "the toast",
            pause=pilot.pause,
        )  # fmt: skip
    assert sentence == "nothing of demo to export as tokens; no file written"
    assert not target.exists() and not target.with_name("tokens.jsonl.partial").exists()


async def test_a_path_that_cannot_be_written_is_refused_in_the_dialog(daemon: Daemon, tmp_path: Path) -> None:
    daemon.chat()
    app, said = started(daemon)
    async with app.run_test(size=(120, 30)) as pilot:
        dialog = await open_dialog(app, pilot)
        await fill(dialog, pilot, tmp_path / "no-such-folder" / "out.jsonl")
        await eventually(lambda: said, 60, "the refusal", pause=pilot.pause)
        assert said[-1] == f"there is no folder {tmp_path / 'no-such-folder'}"
        await fill(dialog, pilot, tmp_path)
        await eventually(lambda: len(said) == 2, 60, "the second refusal", pause=pilot.pause)
        assert said[-1] == f"{tmp_path} is a folder; name a file in it"
        assert app.screen is dialog  # still open, to correct the path
        await pilot.press("escape")
        await eventually(lambda: not isinstance(app.screen, ExportScreen), 60, "the dialog closed", pause=pilot.pause)
    assert list(tmp_path.iterdir()) == []


async def test_the_list_of_every_scenario_asks_which_one(daemon: Daemon, tmp_path: Path) -> None:
    daemon.chat(scenario="demo")
    daemon.chat(scenario="other", question="only in other")
    target = tmp_path / "other.jsonl"
    app, said = started(daemon, scenario=None)
    async with app.run_test(size=(120, 30)) as pilot:
        await eventually(lambda: "other" in app.scenario_names, 60, "the scenarios", pause=pilot.pause)
        dialog = await open_dialog(app, pilot)
        await fill(dialog, pilot, target)
        await eventually(lambda: said, 60, "the refusal", pause=pilot.pause)
        assert said[-1] == "choose the scenario to export first, or press escape"
        dialog.query_one("#export-scenario", Select).value = "other"
        await eventually(
            lambda: dialog.query_one("#export-file", Input).value == str(target), 60, "the typed path kept",
            pause=pilot.pause,
        )  # fmt: skip
        await pilot.press("enter")
        await eventually(lambda: target.exists(), 60, "the file", pause=pilot.pause)
    assert target.read_text().splitlines() == exported_by_the_cli(daemon, "other")


async def test_at_80_columns_x_exports_and_the_footer_keeps_quit_and_scenario(daemon: Daemon, tmp_path: Path) -> None:
    daemon.chat()
    app, said = started(daemon)
    async with app.run_test(size=(80, 24)) as pilot:
        await eventually(lambda: app.screen.query(FooterKey), 60, "the footer", pause=pilot.pause)
        shown = {key.description for key in app.screen.query(FooterKey)}
        assert {"Quit", "Scenario"} <= shown and "Export" not in shown
        assert "Export" in [command.title for command in app.get_system_commands(app.screen)]  # the palette has it
        dialog = await open_dialog(app, pilot)
        await fill(dialog, pilot, tmp_path / "narrow.jsonl")
        await eventually(lambda: any(line.startswith("exported") for line in said), 60, "the toast", pause=pilot.pause)
        await pilot.resize_terminal(120, 30)
        await eventually(
            lambda: "Export" in {key.description for key in app.screen.query(FooterKey)}, 60, "x Export in the footer",
            pause=pilot.pause,
        )  # fmt: skip
