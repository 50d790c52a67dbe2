"""Canaries from the versions screen against a real reefine daemon: a canary of the selected version started with
the share asked in a box and ended behind a confirmation, as the daemon then answers; a share outside 1-99 and the
served version are refused with a reason; a canary started or ended elsewhere shows without a key press; a promote
ends the canary shown; a step that published no release is refused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from textual.widgets import DataTable, Input, Label, Static

from reef_tui import ReefApp
from reef_tui.screens.canary import BAD_SHARE, CanaryScreen
from reef_tui.screens.confirm import ConfirmScreen
from reef_tui.screens.versions import VersionsScreen
from tests.support.fake_proposer_model import FakeProposerModel, answer
from tests.support.tui_fixed import FixedClient
from tests.support.tui_testing import Daemon
from tests.support.waiting import eventually, eventually_sync

EXTENSION = {"id": "chime", "kind": "extension", "config": {"name": "chime", "code": "export default () => {}\n"}}
CANARY = "/reef/scenarios/harness/canary"


@pytest.fixture(scope="module")
def pending(reefine_daemon: Daemon, proposer: tuple[FakeProposerModel, str]) -> Iterator[str]:
    """A pending v1 (an extension waits for review) beside the served v0: its release id."""
    model, _url = proposer
    model.script("answer", answer("Chime when done.\n\nHow to use: it chimes.", EXTENSION))
    request = reefine_daemon.post("/reef/train", {"text": "chime when done"}, scenario="harness")["agent_record_id"]
    eventually_sync(
        lambda: reefine_daemon.get(f"/reef/requests/{request}"), 60, "the request to settle",
        satisfied=lambda progress: progress["state"] == "settled",
    )  # fmt: skip
    rows = reefine_daemon.get("/reef/scenarios/harness/releases")["releases"]
    yield next(row["release_id"] for row in rows if row["version"] == "v1" and row.get("pending"))


def running(daemon: Daemon) -> dict[str, Any] | None:
    canary: dict[str, Any] | None = daemon.get(CANARY)["canary"]
    return canary


async def open_versions(app: ReefApp, pilot: Any, version: str) -> VersionsScreen:
    """The versions screen with `version` (`-`: a step that published none) under the cursor."""
    await eventually(lambda: app.connected, 60, "the daemon to answer", pause=pilot.pause)
    await pilot.press("v")
    screen: VersionsScreen = await eventually(
        lambda: isinstance(app.screen, VersionsScreen) and app.screen, 60, "versions", pause=pilot.pause
    )
    table = screen.query_one(DataTable)

    def row_of_version() -> int | None:
        keys = [str(row.key.value) for row in table.ordered_rows]
        return next((keys.index(k) for k in keys if (screen.releases[k].get("version") or "-") == version), None)

    row = await eventually(
        row_of_version, 60, f"{version} listed", satisfied=lambda r: r is not None, pause=pilot.pause
    )
    table.move_cursor(row=row)
    return screen


def banner(screen: VersionsScreen) -> str:
    """The canary line over the list; empty while it is hidden."""
    shown = screen.query_one("#version-canary", Static)
    return str(shown.content) if shown.display else ""


async def test_a_canary_is_started_and_ended_from_the_screen(reefine_daemon: Daemon, pending: str) -> None:
    app = ReefApp(reefine_daemon.url, scenario="harness")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_versions(app, pilot, "v1")
        assert banner(screen) == ""
        await pilot.press("c")
        dialog = await eventually(
            lambda: isinstance(app.screen, CanaryScreen) and app.screen, 60, "the share box", pause=pilot.pause
        )
        assert dialog.query_one(Input).value == "20"
        await pilot.press("backspace", "backspace", "3", "5", "enter")
        started = await eventually(lambda: running(reefine_daemon), 60, "the canary on the daemon", pause=pilot.pause)
        assert (started["release_id"], started["version"], started["share"]) == (pending, "v1", 35.0)
        await eventually(
            lambda: banner(screen).startswith("canary v1: 35% of new sessions since"), 60, "it shown", pause=pilot.pause
        )

        await pilot.press("x")
        await eventually(lambda: isinstance(app.screen, ConfirmScreen), 60, "the confirmation", pause=pilot.pause)
        await pilot.press("y")
        await eventually(lambda: running(reefine_daemon) is None, 60, "the canary ended", pause=pilot.pause)
        await eventually(lambda: banner(screen) == "", 60, "it gone from the screen", pause=pilot.pause)


async def test_a_share_outside_1_to_99_is_refused_in_the_box(reefine_daemon: Daemon, pending: str) -> None:
    app = ReefApp(reefine_daemon.url, scenario="harness")
    async with app.run_test(size=(120, 40)) as pilot:
        await open_versions(app, pilot, "v1")
        await pilot.press("c")
        dialog = await eventually(
            lambda: isinstance(app.screen, CanaryScreen) and app.screen, 60, "the share box", pause=pilot.pause
        )
        problem = dialog.query_one("#canary-problem", Label)
        for typed in ("0", "100", "abc", "12.5"):
            dialog.query_one(Input).value = ""
            await pilot.press(*typed, "enter")
            await eventually(lambda: str(problem.content) == BAD_SHARE, 60, f"{typed} refused", pause=pilot.pause)
            assert app.screen is dialog
            problem.update("")
        await pilot.press("escape")
        await eventually(lambda: isinstance(app.screen, VersionsScreen), 60, "the box closed", pause=pilot.pause)
        assert running(reefine_daemon) is None


def notes(app: ReefApp) -> list[str]:
    """What the app says in its notifications from now on."""
    said: list[str] = []
    notify = app.notify
    app.notify = lambda message, **kw: (said.append(str(message)), notify(message, **kw))[1]  # type: ignore[method-assign]
    return said


async def test_the_served_version_is_refused_and_no_canary_to_end_is_said(reefine_daemon: Daemon, pending: str) -> None:
    app = ReefApp(reefine_daemon.url, scenario="harness")
    said = notes(app)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_versions(app, pilot, "v0")
        await pilot.press("c")
        await eventually(lambda: said, 60, "a reason", pause=pilot.pause)
        assert said == ["v0 is the served version; a canary tries another"]
        assert not isinstance(app.screen, CanaryScreen) and running(reefine_daemon) is None
        await pilot.press("x")
        await eventually(lambda: len(said) == 2, 60, "a reason", pause=pilot.pause)
        assert said[1] == "no canary runs in harness" and not isinstance(app.screen, ConfirmScreen)


async def test_a_step_that_published_no_release_is_refused() -> None:
    app = ReefApp("http://127.0.0.1:8900", scenario="demo", client=FixedClient("reefine"), follow=False)
    said = notes(app)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_versions(app, pilot, "-")  # the skipped step
        await pilot.press("c")
        await eventually(lambda: said, 60, "a reason", pause=pilot.pause)
        assert said == ["this step published no release: choose a version that did"]
        assert not isinstance(app.screen, CanaryScreen)


async def test_a_canary_started_and_ended_elsewhere_shows_without_a_key(reefine_daemon: Daemon, pending: str) -> None:
    app = ReefApp(reefine_daemon.url, scenario="harness")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_versions(app, pilot, "v0")
        assert banner(screen) == ""
        reefine_daemon.post(CANARY, {"release_id": pending, "share": 15})  # as `reef promote --canary 15 v1` does
        await eventually(lambda: banner(screen).startswith("canary v1: 15%"), 60, "it shown", pause=pilot.pause)
        assert "canary 15%" in screen.query_one(DataTable).get_row_at(0)[3]  # v1's row says so too
        httpx.delete(reefine_daemon.url + CANARY, timeout=30).raise_for_status()  # as `reef rollback` does
        await eventually(lambda: banner(screen) == "", 60, "it gone", pause=pilot.pause)


async def test_promoting_the_canary_ends_it_on_screen(reefine_daemon: Daemon, pending: str) -> None:
    reefine_daemon.post(CANARY, {"release_id": pending, "share": 20})
    app = ReefApp(reefine_daemon.url, scenario="harness")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_versions(app, pilot, "v1")
        await eventually(lambda: banner(screen).startswith("canary v1: 20%"), 60, "the canary", pause=pilot.pause)
        await pilot.press("p")
        await eventually(lambda: isinstance(app.screen, ConfirmScreen), 60, "the confirmation", pause=pilot.pause)
        await pilot.press("y")
        await eventually(lambda: running(reefine_daemon) is None, 60, "the daemon to end it", pause=pilot.pause)
        await eventually(lambda: banner(screen) == "", 60, "it gone from the screen", pause=pilot.pause)
        table = screen.query_one(DataTable)
        await eventually(lambda: table.get_row_at(0)[0] == "v2", 60, "v1 promoted as v2", pause=pilot.pause)
