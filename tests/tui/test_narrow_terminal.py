"""At 80x24 nothing that matters is cut: the daemon bar keeps the model in view, the "daemon gone" line wraps
rather than losing its end, and the training screen's title wraps."""

from __future__ import annotations

from textual.widgets import Static

from reef_tui import ReefApp
from reef_tui.screens.training import TrainingScreen
from reef_tui.widgets.daemon_bar import DaemonBar, describe
from tests.support.tui_fixed import FixedClient
from tests.support.waiting import eventually


def fixed_app(recipe: str = "reefine") -> ReefApp:
    return ReefApp("http://127.0.0.1:8900", scenario="demo", client=FixedClient(recipe), follow=False)


def test_the_model_stays_in_view_when_the_line_is_narrow() -> None:
    status = FixedClient("sao").status()
    status["runtime"] = {"kind": "embedded", "model": "SmolLM2-135M-Instruct", "weight_version": 12}  # type: ignore[typeddict-item]
    wide = str(describe("http://127.0.0.1:8900", status))
    assert wide == "http://127.0.0.1:8900 · recipe sao · runtime embedded · model SmolLM2-135M-Instruct · weights 12"
    narrow = str(describe("http://127.0.0.1:8900", status, 78))
    assert len(narrow) <= 78 and narrow.endswith("model SmolLM2-135M-Instruct · weights 12")


async def test_at_80_columns_the_bar_the_gone_line_and_the_training_title_are_whole() -> None:
    app = fixed_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await eventually(lambda: app.connected, 60, "the status", pause=pilot.pause)
        bar = app.screen.query_one(DaemonBar)
        await pilot.pause()
        shown = str(bar.content)
        assert "model fake-model" in shown and len(shown) <= bar.content_region.width, shown

        await pilot.press("t")
        training = await eventually(lambda: isinstance(app.screen, TrainingScreen) and app.screen, 60, "training",
                                    pause=pilot.pause)  # fmt: skip
        title = training.query_one("#training-title", Static)
        await eventually(lambda: "such as sao" in str(title.content), 60, "the title", pause=pilot.pause)
        assert title.size.height >= 2  # wrapped, not cut

        app.gone_reason = "the daemon at http://127.0.0.1:8900 stopped answering (connection refused)"
        app.connected = False
        gone = app.screen.query_one(DaemonBar)
        await eventually(lambda: gone.size.height >= 2, 60, "the gone line wrapped", pause=pilot.pause)
        assert str(gone.content).endswith("showing what was loaded; reconnecting")
