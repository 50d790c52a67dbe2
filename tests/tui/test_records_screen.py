"""The records screen as a person reads it: the first words of each exchange in the list, receipts short and model
names whole, the selected record's exchange in a pane on a tall terminal, and a cursor that stays on the record the
person put it on while new ones arrive."""

from __future__ import annotations

from typing import Any, cast

from rich.console import Console

from reef_client import Event, RecordDetail, RecordRow
from reef_tui import ReefApp
from reef_tui.live import DaemonEvent
from reef_tui.widgets.record_columns import columns_for, fitted_widths, row_line
from reef_tui.widgets.record_list import RecordList
from reef_tui.widgets.record_preview import RecordPreview, preview_view
from tests.support.tui_fixed import QUESTIONS, T0, FixedClient, detail, receipt, row
from tests.support.waiting import eventually

LONG_MODEL = "Qwen/Qwen2.5-Coder-7B-Instruct"


async def started(app: ReefApp, pilot: Any) -> RecordList:
    records = app.screen.query_one(RecordList)
    await eventually(lambda: app.connected and len(records.rows) > 20, 60, "the records", pause=pilot.pause)
    return records


def arrives(app: ReefApp, n: int) -> None:
    app.post_message(DaemonEvent(Event("record", n, "demo", {"record": row(n)})))


async def test_follow_moves_the_cursor_only_while_it_is_on_the_newest_record() -> None:
    app = ReefApp("http://127.0.0.1:8900", client=FixedClient(), follow=False)
    async with app.run_test(size=(120, 30)) as pilot:
        records = await started(app, pilot)
        arrives(app, 31)
        await eventually(lambda: records.rows[0]["id"] == receipt(31), 60, "record 31", pause=pilot.pause)
        assert records.current is not None and records.current["id"] == receipt(31)  # on the newest: follows

        await pilot.press("down", "down")
        reading = records.current
        assert reading is not None
        arrives(app, 32)
        await eventually(lambda: records.rows[0]["id"] == receipt(32), 60, "record 32", pause=pilot.pause)
        assert records.current is not None and records.current["id"] == reading["id"]  # stays where it was put


async def test_the_list_shows_what_was_asked_and_answered_with_short_receipts() -> None:
    app = ReefApp("http://127.0.0.1:8900", client=FixedClient(), follow=False)
    async with app.run_test(size=(160, 48)) as pilot:
        records = await started(app, pilot)
        newest = records.rows[0]
        line = row_line(newest, records.columns).plain
        assert newest["id"][:8] in line and newest["id"] not in line
        assert "What is the capital of France? → **Paris** is the capital." in line


async def test_a_tall_terminal_shows_the_selected_exchange_and_follows_the_cursor() -> None:
    app = ReefApp("http://127.0.0.1:8900", client=FixedClient(), follow=False)
    async with app.run_test(size=(160, 48)) as pilot:
        records = await started(app, pilot)
        pane = app.screen.query_one(RecordPreview)
        body = pane.query_one("#record-preview-body")

        def shown() -> str:
            return plain(body.content)

        await eventually(lambda: QUESTIONS[30 % 3] in shown(), 60, "the newest record's question", pause=pilot.pause)
        await pilot.press("down")
        await eventually(lambda: QUESTIONS[29 % 3] in shown(), 60, "the next record's question", pause=pilot.pause)
        assert records.rows[1]["id"] in shown()  # the receipt in full


async def test_c_copies_the_whole_receipt() -> None:
    app = ReefApp("http://127.0.0.1:8900", client=FixedClient(), follow=False)
    async with app.run_test(size=(80, 24)) as pilot:
        records = await started(app, pilot)
        await pilot.press("down", "c")
        assert app.clipboard == records.rows[1]["id"] and len(app.clipboard) == 32


async def test_a_short_terminal_has_no_preview_pane() -> None:
    app = ReefApp("http://127.0.0.1:8900", client=FixedClient(), follow=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        assert not app.screen.query_one(RecordPreview).display


def test_the_model_column_fits_the_longest_model_at_160_columns() -> None:
    rows: list[RecordRow] = [{**row(1), "model": LONG_MODEL}, row(2)]
    columns = {column.name: column for column in columns_for(157, fitted_widths(rows))}
    assert columns["model"].width == len(LONG_MODEL)
    assert LONG_MODEL in row_line(rows[0], list(columns.values())).plain


def plain(renderable: Any) -> str:
    """What a renderable shows, as plain text."""
    console = Console(width=200)
    with console.capture() as capture:
        console.print(renderable)
    return capture.get()


def test_the_preview_says_which_turn_a_derived_score_was_read_from_and_why() -> None:
    turn = receipt(31)
    report: dict[str, Any] = {
        "id": receipt(901), "scenario": "demo", "type": "report", "created_at": T0 + 3600, "score": 0.0,
        "source": "next-turn", "feedback": "the user asked for the file the answer left out",
        "evidence": {"verdict": "corrected", "next_record": turn, "next_message": "No, which file?\nName it."},
    }  # fmt: skip
    said = f'read from turn {turn} ("No, which file? Name it."), corrected: the user asked for the file the answer'
    scored = {**detail(1), "score": 0.0, "source": "next-turn", "reports": [report]}
    assert f"score from next-turn: {said}" in plain(preview_view(cast(RecordDetail, scored)))
    assert f"next-turn: {said}" in plain(preview_view(cast(RecordDetail, report)))
