"""The score keys send points of the daemon's score scale — 1 the worst, 5 the best — and say what they sent: the
toast names the record and the score, the help table and the palette list each key's score, and no palette entry
sends a score other than its own."""

from __future__ import annotations

from typing import Any

from textual.command import CommandList, CommandPalette

from reef_client import ReportAck
from reef_contract import ScoreScale
from reef_tui import ReefApp
from reef_tui.receipts import abbreviated
from reef_tui.screens.help import HelpScreen
from reef_tui.widgets.record_list import RecordList
from tests.support.tui_fixed import FixedClient
from tests.support.waiting import eventually


class ScoringClient(FixedClient):
    """The fixed daemon, with a score scale of its own (or none) and the reports it was sent."""

    def __init__(self, scale: ScoreScale | None = None) -> None:
        super().__init__("reefine")
        self.scale = scale
        self.sent: list[tuple[str, float | None]] = []

    def status(self) -> dict[str, Any]:
        status = super().status()
        return {**status, "score_scale": self.scale} if self.scale else status

    def report(self, scenario: str, references: list[str], **fields: Any) -> ReportAck:
        self.sent.append((references[0], fields.get("score")))
        return super().report(scenario, references, **fields)


def started(client: ScoringClient) -> tuple[ReefApp, list[str]]:
    """The app on `client`, and every toast it shows."""
    app = ReefApp("http://127.0.0.1:8900", client=client, follow=False)
    said: list[str] = []
    notify = app.notify
    app.notify = lambda message, **kw: (said.append(str(message)), notify(message, **kw))[1]  # type: ignore[method-assign]
    return app, said


def top_command(app: ReefApp) -> str | None:
    """The title of the palette's first result, once it has one."""
    results = app.screen.query_one(CommandList)
    return str(results.get_option_at_index(0).prompt).split("\n")[0] if results.option_count else None


async def ready(app: ReefApp, pilot: Any) -> RecordList:
    records = app.screen.query_one(RecordList)
    await eventually(lambda: app.connected and records.rows, 60, "the records and the status", pause=pilot.pause)
    return records


async def test_without_a_declared_scale_keys_spread_over_0_to_1_and_the_toast_names_the_record() -> None:
    client = ScoringClient()
    app, said = started(client)
    async with app.run_test(size=(120, 30)) as pilot:
        records = await ready(app, pilot)
        first = records.rows[0]["id"]
        await pilot.press("2")
        await eventually(lambda: client.sent, 60, "the report", pause=pilot.pause)
        assert client.sent == [(first, 0.25)]
        await eventually(lambda: f"scored {abbreviated(first)}: 0.25" in said, 60, "the toast", pause=pilot.pause)


async def test_keys_follow_the_scale_the_daemon_declares() -> None:
    client = ScoringClient({"min": 1.0, "max": 5.0})
    app, _said = started(client)
    async with app.run_test(size=(120, 30)) as pilot:
        records = await ready(app, pilot)
        worst, best = records.rows[0]["id"], records.rows[1]["id"]
        await pilot.press("1")
        await eventually(lambda: len(client.sent) == 1, 60, "the first report", pause=pilot.pause)
        records.cursor = 1
        await pilot.press("5")
        await eventually(lambda: len(client.sent) == 2, 60, "the second report", pause=pilot.pause)
        assert client.sent == [(worst, 1.0), (best, 5.0)]
        await pilot.press("question_mark")
        await eventually(lambda: isinstance(app.screen, HelpScreen), 60, "the help", pause=pilot.pause)
        text = app.screen.query_one("Markdown").source  # type: ignore[attr-defined]
        assert "from 1 (worst) to 5 (best)" in text and "| `1` | 1 (worst) |" in text and "| `2` | 2 |" in text


async def test_the_palette_lists_each_score_and_sends_the_one_chosen() -> None:
    client = ScoringClient()
    app, _said = started(client)
    async with app.run_test(size=(120, 30)) as pilot:
        records = await ready(app, pilot)
        first = records.rows[0]["id"]
        titles = [command.title for command in app.get_system_commands(app.screen)]
        assert [t for t in titles if t.startswith("Score")] == [
            "Score 0 (worst)", "Score 0.25", "Score 0.5", "Score 0.75", "Score 1 (best)"
        ]  # fmt: skip
        await pilot.press("ctrl+p")
        await eventually(lambda: isinstance(app.screen, CommandPalette), 60, "the palette", pause=pilot.pause)
        await pilot.press(*"Score 0.75")
        await eventually(lambda: top_command(app) == "Score 0.75", 60, "the score found", pause=pilot.pause)
        await pilot.press("enter")
        await eventually(lambda: client.sent, 60, "the report", pause=pilot.pause)
        assert client.sent == [(first, 0.75)]
