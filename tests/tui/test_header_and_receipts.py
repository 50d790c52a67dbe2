"""What the app shows of the daemon keeps up with it: receipts of records made in the same minute look different in
the list, and the header's weight version follows the training steps."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from textual.widgets import Static

from reef_client import Event
from reef_tui import ReefApp
from reef_tui.live import DaemonEvent
from reef_tui.receipts import abbreviated, short
from reef_tui.widgets.daemon_bar import DaemonBar
from tests.support.tui_fixed import FixedClient
from tests.support.waiting import eventually

MINUTE_START_MS = 0x019B_7800_0000  # a millisecond whose lower 16 bits are zero


def daemon_receipt(ms: int, random: str) -> str:
    """A receipt as the daemon makes one: 12 hex digits of the millisecond, then 20 random ones."""
    return f"{ms:012x}{random}"


def test_receipts_made_in_the_same_minute_are_shown_apart() -> None:
    seconds_apart = [daemon_receipt(MINUTE_START_MS + 1000 * s, "5" * 20) for s in (0, 7, 41)]
    same_millisecond = [daemon_receipt(MINUTE_START_MS, f"{n:x}" * 20) for n in (1, 2)]
    for made in (seconds_apart, same_millisecond):
        assert len({short(receipt) for receipt in made}) == len(made), [short(receipt) for receipt in made]
        assert all(receipt.startswith(short(receipt)) for receipt in made)  # still the receipt's start
    assert abbreviated(same_millisecond[0]) == f"{same_millisecond[0][:16]}…"


class SteppingClient(FixedClient):
    """A weight runtime whose version is the number of steps committed."""

    def __init__(self) -> None:
        super().__init__("sao")
        self.steps = 12

    def status(self) -> dict[str, Any]:
        status = super().status()
        return {**status, "runtime": {**status["runtime"], "weight_version": self.steps}}


async def test_the_header_follows_the_weight_version_after_a_step() -> None:
    client = SteppingClient()
    app = ReefApp("http://127.0.0.1:8900", scenario="demo", client=client, follow=False)
    async with app.run_test(size=(160, 30)) as pilot:
        bar = app.screen.query_one(DaemonBar)
        await eventually(lambda: "weights 12" in str(bar.content), 60, "weights 12", pause=pilot.pause)
        client.steps = 13
        step = {"step": {"step": 13, "version": "v13", "result": "selected", "created_at": 0.0, "metrics": {}}}
        app.post_message(DaemonEvent(Event("step", 40, "demo", step)))
        await eventually(lambda: "weights 13" in str(bar.content), 60, "weights 13", pause=pilot.pause)


class DistrustingClient(FixedClient):
    """A daemon whose judge stops counting in `demo` once `distrusted` is set."""

    def __init__(self) -> None:
        super().__init__("sao")
        self.distrusted = False

    def status(self) -> dict[str, Any]:
        reason = "its agreement with people's scores is κ -1.00 on 20 shared records" if self.distrusted else None
        judge = {
            "shared": 20 if self.distrusted else 19,
            "kappa": -1.0,
            "counts": not self.distrusted,
            "reason": reason,
        }
        return {**super().status(), "sources": {"demo": {"judge": judge}}}


async def test_the_training_screen_follows_a_source_that_stops_counting() -> None:
    client = DistrustingClient()
    app = ReefApp("http://127.0.0.1:8900", scenario="demo", client=client, follow=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await eventually(lambda: app.connected, 60, "the status", pause=pilot.pause)
        await pilot.press("t")
        facts = app.screen.query_one("#training-facts", Static)

        def shown() -> str:
            console = Console(width=200, record=True)
            console.print(facts.content)
            return console.export_text()

        counting = "19 shared records, counts yes"
        await eventually(shown, 60, "the judge counting", satisfied=lambda text: counting in text, pause=pilot.pause)
        client.distrusted = True
        source = {"action": "distrusted", "source": "judge", "agreement": client.status()["sources"]["demo"]["judge"]}
        app.post_message(DaemonEvent(Event("source", 41, "demo", {**source, "reason": "κ -1.00"})))
        stopped = "20 shared records, counts no: its agreement"
        await eventually(shown, 60, "the judge not counting", satisfied=lambda text: stopped in text, pause=pilot.pause)
