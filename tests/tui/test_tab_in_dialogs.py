"""Tab and shift+Tab move between the fields of every dialog, as in any form: the export dialog's scenario, format,
file and least score, the canary's share, the confirmation's two buttons, and so on; the focus never leaves the
dialog for the screen behind it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.screen import ModalScreen
from textual.widget import Widget

from reef_tui import ReefApp
from reef_tui.screens.canary import CanaryScreen
from reef_tui.screens.confirm import ConfirmScreen
from reef_tui.screens.export import ExportScreen
from reef_tui.screens.feedback import FeedbackScreen
from reef_tui.screens.help import HelpScreen
from reef_tui.screens.install import InstallScreen
from reef_tui.screens.new_request import NewRequestScreen
from tests.support.tui_fixed import FixedClient, receipt
from tests.support.waiting import eventually

DIALOGS: dict[str, Callable[[], ModalScreen[object]]] = {
    "export of every scenario": lambda: ExportScreen(None, ["ci", "demo"]),
    "export of one scenario": lambda: ExportScreen("demo", ["ci", "demo"]),
    "confirm": lambda: ConfirmScreen("Promote v2?", "promote"),
    "canary": lambda: CanaryScreen("demo", "v2", "v1"),
    "install": lambda: InstallScreen("demo", "r1", "v1"),
    "feedback": lambda: FeedbackScreen(receipt(1)),
    "new request": lambda: NewRequestScreen("demo"),
    "help": HelpScreen,
}


@pytest.mark.parametrize("make", DIALOGS.values(), ids=DIALOGS.keys())
async def test_tab_and_shift_tab_visit_every_field_of_the_dialog(make: Callable[[], ModalScreen[object]]) -> None:
    app = ReefApp("http://127.0.0.1:8900", scenario="demo", client=FixedClient(), follow=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await eventually(lambda: app.connected, 60, "the status", pause=pilot.pause)
        dialog = make()
        app.push_screen(dialog)
        await eventually(
            lambda: app.screen is dialog and dialog.focused is not None, 60, "the dialog", pause=pilot.pause
        )
        chain = list(dialog.focus_chain)

        async def visit(key: str) -> list[Widget | None]:
            seen = []
            for _ in chain:
                before = app.focused
                await pilot.press(key)
                if len(chain) > 1:
                    await eventually(
                        lambda before=before: app.focused is not before, 60, f"{key} to move", pause=pilot.pause
                    )
                seen.append(app.focused)
            return seen

        forward = await visit("tab")
        assert set(forward) == set(chain), "tab reaches every field"
        assert app.screen is dialog
        backward = await visit("shift+tab")
        assert backward[:-1] == list(reversed(forward))[1:], "shift+tab goes back the same way"
        assert set(backward) == set(chain)


async def test_tab_in_the_export_dialog_reaches_the_scenario_format_and_least_score() -> None:
    app = ReefApp("http://127.0.0.1:8900", scenario=None, client=FixedClient(), follow=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await eventually(lambda: app.connected, 60, "the status", pause=pilot.pause)
        await pilot.press("r", "x")
        dialog = await eventually(lambda: isinstance(app.screen, ExportScreen) and app.screen, 60, "the dialog",
                                  pause=pilot.pause)  # fmt: skip
        reached: set[str | None] = set()
        for _ in range(4):
            before = app.focused
            await pilot.press("tab")
            await eventually(lambda before=before: app.focused is not before, 60, "tab to move", pause=pilot.pause)
            reached.add(app.focused.id if app.focused else None)
        assert {"export-scenario", "export-format", "export-file", "export-min-score"} <= reached
        assert app.screen is dialog
