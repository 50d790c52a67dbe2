"""When the daemon goes away the app says so, keeps what it shows, and picks up by itself when it is back."""

from __future__ import annotations

from pathlib import Path

from reef_tui import ReefApp
from reef_tui.widgets.daemon_bar import DaemonBar
from reef_tui.widgets.record_list import RecordList
from tests.support.tui_testing import start_daemon
from tests.support.waiting import eventually


async def test_gone_then_back_without_a_keypress(tmp_path: Path, upstream_url: str) -> None:
    daemon = start_daemon(tmp_path, upstream_url)
    first = daemon.chat()
    port = int(daemon.url.rsplit(":", 1)[1])
    app = ReefApp(daemon.url)
    async with app.run_test(size=(100, 30)) as pilot:
        records = app.screen.query_one(RecordList)
        await eventually(
            lambda: [row["id"] for row in records.rows] == [first], 60, "the first record", pause=pilot.pause
        )
        daemon.stop()
        await eventually(lambda: app.connected is False, 60, "the app to notice the daemon is gone", pause=pilot.pause)
        bar = app.screen.query_one(DaemonBar)
        assert bar.has_class("-gone") and "reconnecting" in str(bar.content)
        assert [row["id"] for row in records.rows] == [first]  # what it showed stays

        daemon = start_daemon(tmp_path, upstream_url, port=port)
        try:
            await eventually(lambda: app.connected, 60, "the app to reconnect", pause=pilot.pause)
            second = daemon.chat()
            await eventually(
                lambda: records.rows[0]["id"] == second, 60, "a record made after the restart", pause=pilot.pause
            )
            assert not bar.has_class("-gone")
        finally:
            daemon.stop()
