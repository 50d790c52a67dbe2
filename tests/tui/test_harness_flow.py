"""Requests and versions against a real reefine daemon and the scripted proposer: a request filed from the app
settles live; its pending version is diffed and promoted through the confirmation dialog; a version is installed
with the daemon's install script."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.syntax import Syntax
from textual.widgets import DataTable, OptionList, Static

from reef_tui import ReefApp
from reef_tui.screens.confirm import ConfirmScreen
from reef_tui.screens.install import InstallScreen
from reef_tui.screens.new_request import NewRequestScreen
from reef_tui.screens.requests import RequestsScreen
from reef_tui.screens.versions import VersionsScreen
from tests.support.fake_proposer_model import FakeProposerModel, answer
from tests.support.tui_testing import Daemon
from tests.support.waiting import eventually

EXTENSION = {"id": "notify", "kind": "extension", "config": {"name": "notify", "code": "export default () => {}\n"}}


async def test_a_request_settles_and_its_version_is_promoted(
    reefine_daemon: Daemon, proposer: tuple[FakeProposerModel, str]
) -> None:
    model, _url = proposer
    model.script("answer", answer("Notify when done.\n\nHow to use: it notifies by itself.", EXTENSION))
    app = ReefApp(reefine_daemon.url, scenario="harness")
    async with app.run_test(size=(120, 40)) as pilot:
        await eventually(lambda: app.connected, 60, "the daemon to answer", pause=pilot.pause)
        await pilot.press("e")
        requests = await eventually(
            lambda: isinstance(app.screen, RequestsScreen) and app.screen, 60, "requests", pause=pilot.pause
        )
        await pilot.press("n")
        await eventually(lambda: isinstance(app.screen, NewRequestScreen), 60, "the request box", pause=pilot.pause)
        await pilot.press(*"notify me when done", "enter")

        def settled() -> dict[str, Any] | None:
            done = [p for p in requests.progress.values() if p.get("state") == "settled"]
            return done[0] if done else None

        progress = await eventually(settled, 60, "the request to settle on screen", pause=pilot.pause)
        assert (progress["result"], progress["version"]) == ("pending", "v1")
        assert progress["how_to_use"] == "it notifies by itself."

        await pilot.press("v")
        versions = await eventually(
            lambda: isinstance(app.screen, VersionsScreen) and app.screen, 60, "versions", pause=pilot.pause
        )
        await eventually(
            lambda: versions.query_one(DataTable).row_count == 2, 60, "v1 and v0 listed", pause=pilot.pause
        )
        assert versions.releases[next(iter(versions.releases))]["pending"] is True
        await pilot.press("d")
        view = versions.query_one("#version-view", Static)
        diff = await eventually(
            lambda: isinstance(view.content, Syntax) and view.content, 60, "the diff", pause=pilot.pause
        )
        assert "+++ b/pi-agent/extensions/notify.ts" in diff.code

        await pilot.press("p")
        await eventually(lambda: isinstance(app.screen, ConfirmScreen), 60, "the confirmation", pause=pilot.pause)
        await pilot.press("y")
        releases = lambda: reefine_daemon.get("/reef/scenarios/harness/releases")["releases"]  # noqa: E731
        head = await eventually(
            lambda: releases()[0]["operation"] == "promote" and releases()[0], 60, "the promote", pause=pilot.pause
        )
        assert (head["version"], head["current"]) == ("v2", True)
        await eventually(
            lambda: versions.query_one(DataTable).row_count == 3, 60, "the promoted version listed", pause=pilot.pause
        )


async def test_requests_filed_one_after_another_are_listed_newest_first(reefine_daemon: Daemon) -> None:
    app = ReefApp(reefine_daemon.url, scenario="harness")
    async with app.run_test(size=(120, 40)) as pilot:
        await eventually(lambda: app.connected, 60, "the daemon to answer", pause=pilot.pause)
        await pilot.press("e")
        requests = await eventually(
            lambda: isinstance(app.screen, RequestsScreen) and app.screen, 60, "requests", pause=pilot.pause
        )
        table = requests.query_one(DataTable)
        for text in ("ask for tests first", "ask for short commits"):
            await pilot.press("n")
            await eventually(lambda: isinstance(app.screen, NewRequestScreen), 60, "the request box", pause=pilot.pause)
            await pilot.press(*text, "enter")
            await eventually(
                lambda t=text: any(p.get("text") == t for p in requests.progress.values()), 60, text, pause=pilot.pause
            )
        assert table.get_row_at(0)[4] == "ask for short commits"
        assert table.get_row_at(1)[4] == "ask for tests first"
        assert table.row_count == len(requests.progress)


async def test_the_request_box_warns_when_the_served_model_is_the_small_embedded_one(reefine_daemon: Daemon) -> None:
    app = ReefApp(reefine_daemon.url, scenario="harness")
    async with app.run_test(size=(120, 40)) as pilot:
        await eventually(lambda: app.connected, 60, "the daemon to answer", pause=pilot.pause)
        await pilot.press("e")
        await eventually(lambda: isinstance(app.screen, RequestsScreen), 60, "requests", pause=pilot.pause)
        await pilot.press("n")
        box = await eventually(lambda: isinstance(app.screen, NewRequestScreen) and app.screen, 60, "the request box",
                               pause=pilot.pause)  # fmt: skip
        assert not box.query("#request-caution")  # a capable upstream model: nothing to warn about
        await pilot.press("escape")
        # The same daemon as it would say it serves the small embedded model.
        status = app.daemon_status
        assert status is not None
        small = {"kind": "embedded", "engine": "torch", "model": "SmolLM2-135M-Instruct", "parameters": 134_515_008}
        app.daemon_status = {**status, "runtime": small}  # type: ignore[typeddict-item]
        await pilot.press("n")
        box = await eventually(lambda: isinstance(app.screen, NewRequestScreen) and app.screen, 60, "the request box",
                               pause=pilot.pause)  # fmt: skip
        caution = str(box.query_one("#request-caution", Static).render())
        assert "harness changes need a capable model" in caution and "--inference.upstream-url" in caution


async def test_a_live_update_widens_its_column(reefine_daemon: Daemon) -> None:
    app = ReefApp(reefine_daemon.url, scenario="harness")
    async with app.run_test(size=(120, 40)) as pilot:
        await eventually(lambda: app.connected, 60, "the daemon to answer", pause=pilot.pause)
        await pilot.press("e")
        requests = await eventually(
            lambda: isinstance(app.screen, RequestsScreen) and app.screen, 60, "requests", pause=pilot.pause
        )
        await eventually(lambda: requests.refusal() is None, 60, "requests taken", pause=pilot.pause)
        await pilot.press("n")
        await eventually(lambda: isinstance(app.screen, NewRequestScreen), 60, "the request box", pause=pilot.pause)
        await pilot.press(*"something vague", "enter")
        # The row comes while the request is queued; the scripted proposer then writes nothing usable, so its
        # result turns "skipped" live, and the column widens to show it whole.
        table = requests.query_one(DataTable)

        def shown_whole() -> bool:
            if table.row_count == 0 or table.get_row_at(0)[2] != "skipped":
                return False
            result = next(column for column in table.columns.values() if str(column.label) == "result")
            return result.get_render_width(table) - 2 * table.cell_padding >= len("skipped")

        await eventually(shown_whole, 60, "the skipped result shown whole in its column", pause=pilot.pause)


async def test_a_version_is_installed_from_the_versions_screen(
    reefine_daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # the install writes ~/reef-harness/harness/pi and ~/.local/bin
    app = ReefApp(reefine_daemon.url, scenario="harness")
    async with app.run_test(size=(120, 40)) as pilot:
        await eventually(lambda: app.connected, 60, "the daemon to answer", pause=pilot.pause)
        await pilot.press("v")
        versions = await eventually(
            lambda: isinstance(app.screen, VersionsScreen) and app.screen, 60, "versions", pause=pilot.pause
        )
        table = versions.query_one(DataTable)
        await eventually(lambda: table.row_count >= 1, 60, "a version listed", pause=pilot.pause)
        keys = [str(row.key.value) for row in table.ordered_rows]
        chosen = next(key for key in keys if versions.releases[key].get("release_id"))  # v0 at least
        table.move_cursor(row=keys.index(chosen))

        await pilot.press("i")
        dialog = await eventually(
            lambda: isinstance(app.screen, InstallScreen) and app.screen, 60, "the dialog", pause=pilot.pause
        )
        adapters = dialog.query_one(OptionList)
        await eventually(lambda: adapters.option_count == 5, 60, "the five adapters", pause=pilot.pause)
        assert adapters.highlighted == 0 and adapters.has_focus  # enter would install for the first at once
        adapters.highlighted = next(i for i in range(5) if adapters.get_option_at_index(i).id == "pi")
        await pilot.press("enter")
        log = dialog.query_one("#install-log", Static)
        said = await eventually(
            lambda: str(log.content).startswith(("installed", "the install")) and log.content,
            60,
            "the end",
            pause=pilot.pause,
        )
        assert str(said).startswith("installed"), said

        sidecar = json.loads((tmp_path / "reef-harness" / "harness" / "pi" / ".reef-harness-release").read_text())
        assert sidecar["release_id"] == versions.releases[chosen]["release_id"] and sidecar["adapter"] == "pi"
        assert (tmp_path / ".local" / "bin" / "reef-pi").exists()
        await pilot.press("escape")
        await eventually(
            lambda: versions.releases[chosen].get("installed") is True,
            60,
            "the version marked installed",
            pause=pilot.pause,
        )
