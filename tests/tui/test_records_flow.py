"""Records against a real daemon: a record made by a client appears by itself, with what was asked; one key scores
it; the feedback box sends text; the detail screen shows the conversation; `s` reaches scenarios made after the
app started."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from textual.widgets import Static

from reef_tui import ReefApp
from reef_tui.screens.feedback import FeedbackScreen
from reef_tui.screens.record_detail import RecordDetailScreen
from reef_tui.widgets.record_list import RecordList
from tests.support.tui_testing import Daemon
from tests.support.waiting import eventually


def ids(app: ReefApp) -> list[str]:
    return [row["id"] for row in app.screen.query_one(RecordList).rows]


async def test_a_new_record_appears_without_a_keypress(daemon: Daemon) -> None:
    app = ReefApp(daemon.url)
    async with app.run_test(size=(120, 30)) as pilot:
        await eventually(lambda: app.connected, 60, "the daemon to answer", pause=pilot.pause)
        receipt = daemon.chat(question="Which city is the capital of France?")
        await eventually(lambda: receipt in ids(app), 60, "the new record in the list", pause=pilot.pause)
        assert ids(app)[0] == receipt
        preview = app.screen.query_one(RecordList).rows[0].get("preview")
        assert preview is not None and preview["asked"] == "Which city is the capital of France?"


async def test_s_reaches_a_scenario_made_after_the_app_started(daemon: Daemon) -> None:
    daemon.chat(scenario="demo")
    app = ReefApp(daemon.url)
    async with app.run_test(size=(120, 30)) as pilot:
        await eventually(lambda: "demo" in app.scenario_names, 60, "the daemon's scenarios", pause=pilot.pause)
        daemon.chat(scenario="late-arrival")
        await eventually(lambda: "late-arrival" in app.scenario_names, 60, "the new scenario", pause=pilot.pause)
        for _ in app.scenario_names:
            await pilot.press("s")
            if app.scenario == "late-arrival":
                break
        assert app.scenario == "late-arrival"


async def test_key_4_stores_a_report_and_moves_to_the_next_unscored(daemon: Daemon) -> None:
    older, newer = daemon.chat(), daemon.chat()
    app = ReefApp(daemon.url, scenario="demo")
    async with app.run_test(size=(120, 30)) as pilot:
        await eventually(lambda: ids(app)[:2] == [newer, older], 60, "both records listed", pause=pilot.pause)
        await pilot.press("4")
        report = await eventually(
            lambda: _report_for(daemon, newer), 60, "the daemon to list the report", pause=pilot.pause
        )
        assert report["score"] == 0.75
        records = app.screen.query_one(RecordList)
        await eventually(lambda: records.rows[0]["score"] == 0.75, 60, "the row to show its score", pause=pilot.pause)
        assert records.current is not None and records.current["id"] == older

        said = notes(app)
        await pilot.press("up", "5")  # the newer one again: the new score replaces the old, and the toast says so
        await eventually(lambda: any("had a score of 0.75; 1 replaces it" in line for line in said), 60,
                         "the toast saying the score was replaced", pause=pilot.pause)  # fmt: skip


async def test_the_feedback_box_sends_text(daemon: Daemon) -> None:
    receipt = daemon.chat()
    app = ReefApp(daemon.url, scenario="demo")
    async with app.run_test(size=(120, 30)) as pilot:
        await eventually(lambda: ids(app) and ids(app)[0] == receipt, 60, "the record listed", pause=pilot.pause)
        await pilot.press("f")
        await eventually(lambda: isinstance(app.screen, FeedbackScreen), 60, "the feedback box", pause=pilot.pause)
        await pilot.press(*"too long-winded", "enter")
        await eventually(lambda: _report_for(daemon, receipt), 60, "the feedback stored", pause=pilot.pause)
        detail = daemon.get(f"/reef/records/{receipt}")
        assert [report["feedback"] for report in detail["reports"]] == ["too long-winded"]


async def test_enter_opens_the_record_rendered_as_reef_show_does(daemon: Daemon) -> None:
    receipt = daemon.chat(question="Name the capital of France, please.")
    app = ReefApp(daemon.url, scenario="demo")
    async with app.run_test(size=(120, 40)) as pilot:
        await eventually(lambda: ids(app) and ids(app)[0] == receipt, 60, "the record listed", pause=pilot.pause)
        await pilot.press("enter")
        screen = await eventually(
            lambda: isinstance(app.screen, RecordDetailScreen) and app.screen, 60, "the detail", pause=pilot.pause
        )
        await eventually(lambda: screen.record is not None, 60, "the record loaded", pause=pilot.pause)
        console = Console(width=120, record=True, file=io.StringIO())
        console.print(screen.query_one("#detail", Static).content)
        shown = console.export_text()
        assert "not scored yet: press 1 (worst) to 5 (best), or f for feedback" in shown
        assert "reef score" not in shown  # a CLI command has no place inside the app
        await pilot.press("5")
        await eventually(
            lambda: _report_for(daemon, receipt), 60, "the score from the detail screen", pause=pilot.pause
        )
        await eventually(
            lambda: (screen.record or {}).get("reports"), 60, "the detail to show its report", pause=pilot.pause
        )


def notes(app: ReefApp) -> list[str]:
    """What the app says in its notifications from now on."""
    said: list[str] = []
    notify = app.notify
    app.notify = lambda message, **kw: (said.append(str(message)), notify(message, **kw))[1]  # type: ignore[method-assign]
    return said


def _report_for(daemon: Daemon, receipt: str) -> dict[str, Any] | None:
    detail = daemon.get(f"/reef/records/{receipt}")
    reports: list[dict[str, Any]] = detail.get("reports") or []
    return reports[-1] if reports else None
