"""Every screen as an SVG at 80x24 and 160x48, from fixed data (ids, times and answers never change).

Update after an intended change: pytest tests/tui/test_snapshots.py --snapshot-update
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.syntax import Syntax
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Sparkline, Static

from reef_tui import ReefApp
from reef_tui.screens.canary import CanaryScreen
from reef_tui.screens.export import ExportScreen
from reef_tui.screens.help import HelpScreen
from reef_tui.screens.record_detail import RecordDetailScreen
from reef_tui.widgets.metric_line import MetricLine
from reef_tui.widgets.record_list import RecordList
from reef_tui.widgets.record_preview import RecordPreview
from reef_tui.widgets.request_view import RequestView
from tests.support.tui_fixed import FixedClient, receipt
from tests.support.waiting import eventually

SIZES = [(80, 24), (160, 48)]
Prepare = Callable[[Pilot[Any]], Awaitable[None]]


@pytest.fixture(autouse=True)
def empty_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No harness installed on this machine, whatever the machine: the versions screen shows none."""
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    """Times render in UTC whatever the machine's zone."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if before is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = before
    time.tzset()


async def records(pilot: Pilot[Any]) -> None:
    listed = pilot.app.screen.query_one(RecordList)
    await eventually(lambda: len(listed.rows) > 20, 60, "the fixed records", pause=pilot.pause)
    await eventually(lambda: pilot.app.connected, 60, "the status", pause=pilot.pause)
    pane = pilot.app.screen.query_one(RecordPreview)
    await eventually(
        lambda: not pane.display or pane.shown == listed.rows[0]["id"], 60, "the preview pane", pause=pilot.pause
    )


async def record_detail(pilot: Pilot[Any]) -> None:
    await records(pilot)
    await pilot.press("down", "enter")
    await eventually(lambda: getattr(pilot.app.screen, "record", None) is not None, 60, "the record", pause=pilot.pause)
    assert isinstance(pilot.app.screen, RecordDetailScreen)


async def requests(pilot: Pilot[Any]) -> None:
    await records(pilot)
    await pilot.press("e")
    await eventually(
        lambda: pilot.app.screen.query(DataTable) and _rows(pilot) == 2, 60, "two requests", pause=pilot.pause
    )
    view = pilot.app.screen.query_one(RequestView)
    await eventually(lambda: view.shown == receipt(500), 60, "the newest request's progress", pause=pilot.pause)


async def versions(pilot: Pilot[Any]) -> None:
    await records(pilot)
    await pilot.press("v")
    await eventually(
        lambda: pilot.app.screen.query(DataTable) and _rows(pilot) == 4, 60, "four steps", pause=pilot.pause
    )
    await pilot.press("d")
    view = pilot.app.screen.query_one("#version-view", Static)
    await eventually(lambda: isinstance(view.content, Syntax), 60, "the diff", pause=pilot.pause)


async def canary_box(pilot: Pilot[Any]) -> None:
    """The share box over the versions, for v0 while v2 runs as the canary."""
    await versions(pilot)
    pilot.app.screen.query_one(DataTable).move_cursor(row=3)
    await pilot.press("c")
    await eventually(lambda: isinstance(pilot.app.screen, CanaryScreen), 60, "the share box", pause=pilot.pause)
    await settled(pilot)


async def training(pilot: Pilot[Any]) -> None:
    await records(pilot)
    await pilot.press("t")
    await eventually(lambda: _sparks_filled(pilot), 60, "the sparklines", pause=pilot.pause)


async def help_page(pilot: Pilot[Any]) -> None:
    await records(pilot)
    await pilot.press("question_mark")
    await eventually(lambda: isinstance(pilot.app.screen, HelpScreen), 60, "the help screen", pause=pilot.pause)


async def export_dialog(pilot: Pilot[Any]) -> None:
    await records(pilot)
    await pilot.press("x")
    await eventually(lambda: isinstance(pilot.app.screen, ExportScreen), 60, "the export dialog", pause=pilot.pause)
    await settled(pilot)


async def settled(pilot: Pilot[Any]) -> None:
    """A dialog's input holds the focus with its cursor shown: the cursor blinks every half second, so on a loaded
    machine the snapshot would otherwise catch it in either phase."""
    await eventually(
        lambda: pilot.app.focused is not None and pilot.app.focused.screen is pilot.app.screen,
        60,
        "the dialog's focus",
        pause=pilot.pause,
    )
    for field in pilot.app.screen.query(Input):
        field.cursor_blink = False
    await pilot.pause()


def _rows(pilot: Pilot[Any]) -> int:
    return pilot.app.screen.query_one(DataTable).row_count


def _sparks_filled(pilot: Pilot[Any]) -> bool:
    lines = pilot.app.screen.query(MetricLine)
    return bool(lines) and all(line.query_one(Sparkline).data for line in lines)


SCREENS: dict[str, tuple[str, str | None, Prepare]] = {  # recipe, scenario, how to get there
    "records": ("reefine", None, records),
    "record_detail": ("reefine", None, record_detail),
    "requests": ("reefine", "demo", requests),
    "versions": ("reefine", "demo", versions),
    "canary": ("reefine", "demo", canary_box),
    "training": ("sao", "demo", training),
    "help": ("reefine", None, help_page),
    "export": ("reefine", "demo", export_dialog),
}


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
@pytest.mark.parametrize("screen", list(SCREENS))
def test_screen(screen: str, size: tuple[int, int], snap_compare: Any) -> None:
    recipe, scenario, prepare = SCREENS[screen]
    app = ReefApp("http://127.0.0.1:8900", scenario=scenario, client=FixedClient(recipe), follow=False)
    assert snap_compare(app, terminal_size=size, run_before=prepare)
