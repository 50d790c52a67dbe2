"""Records against a real daemon: a record made by a client appears by itself; one key scores it; the feedback box
sends text; the detail screen shows the conversation."""

from __future__ import annotations

from typing import Any

from reef_tui import ReefApp
from reef_tui.screens.feedback import FeedbackScreen
from reef_tui.screens.record_detail import RecordDetailScreen
from reef_tui.widgets.record_list import RecordList
from tests.support.tui_testing import Daemon, until


def ids(app: ReefApp) -> list[str]:
    return [row["id"] for row in app.screen.query_one(RecordList).rows]


async def test_a_new_record_appears_without_a_keypress(daemon: Daemon) -> None:
    app = ReefApp(daemon.url)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.connected, "the daemon to answer")
        receipt = daemon.chat(question="Which city is the capital of France?")
        await until(pilot, lambda: receipt in ids(app), "the new record in the list")
        assert ids(app)[0] == receipt


async def test_key_4_stores_a_report_and_moves_to_the_next_unscored(daemon: Daemon) -> None:
    older, newer = daemon.chat(), daemon.chat()
    app = ReefApp(daemon.url, scenario="demo")
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: ids(app)[:2] == [newer, older], "both records listed")
        await pilot.press("4")
        report = await until(pilot, lambda: _report_for(daemon, newer), "the daemon to list the report")
        assert report["score"] == 0.75
        records = app.screen.query_one(RecordList)
        await until(pilot, lambda: records.rows[0]["score"] == 0.75, "the row to show its score")
        assert records.current is not None and records.current["id"] == older


async def test_the_feedback_box_sends_text(daemon: Daemon) -> None:
    receipt = daemon.chat()
    app = ReefApp(daemon.url, scenario="demo")
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: ids(app) and ids(app)[0] == receipt, "the record listed")
        await pilot.press("f")
        await until(pilot, lambda: isinstance(app.screen, FeedbackScreen), "the feedback box")
        await pilot.press(*"too long-winded", "enter")
        await until(pilot, lambda: _report_for(daemon, receipt), "the feedback stored")
        detail = daemon.get(f"/reef/records/{receipt}")
        assert [report["feedback"] for report in detail["reports"]] == ["too long-winded"]


async def test_enter_opens_the_record_rendered_as_reef_show_does(daemon: Daemon) -> None:
    receipt = daemon.chat(question="Name the capital of France, please.")
    app = ReefApp(daemon.url, scenario="demo")
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: ids(app) and ids(app)[0] == receipt, "the record listed")
        await pilot.press("enter")
        screen = await until(pilot, lambda: isinstance(app.screen, RecordDetailScreen) and app.screen, "the detail")
        await until(pilot, lambda: screen.record is not None, "the record loaded")
        await pilot.press("5")
        await until(pilot, lambda: _report_for(daemon, receipt), "the score from the detail screen")
        await until(pilot, lambda: (screen.record or {}).get("reports"), "the detail to show its report")


def _report_for(daemon: Daemon, receipt: str) -> dict[str, Any] | None:
    detail = daemon.get(f"/reef/records/{receipt}")
    reports: list[dict[str, Any]] = detail.get("reports") or []
    return reports[-1] if reports else None
