"""`reef tui` started in tmux as a person would: keys typed with send-keys, the screen read with capture-pane."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from reef_tui.receipts import abbreviated
from tests.support.tui_testing import Daemon
from tests.support.waiting import eventually_sync

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
SESSION = "reef-tui-test"


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=30, check=True).stdout


def screen() -> str:
    return tmux("capture-pane", "-p", "-t", SESSION)


@pytest.fixture
def session(daemon: Daemon) -> Iterator[None]:
    command = f"{sys.executable} -m reef_cli tui --url {daemon.url} --scenario demo"
    subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True, timeout=30)
    tmux("new-session", "-d", "-s", SESSION, "-x", "100", "-y", "30", "-c", str(daemon.workdir), command)
    yield
    subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True, timeout=30)


def test_a_person_scores_with_one_key_and_quits(daemon: Daemon, session: None) -> None:
    receipt = daemon.chat(question="Capital of Italy?")
    eventually_sync(
        screen, 60, "the header line with the daemon's recipe", satisfied=lambda shown: "recipe record" in shown
    )
    eventually_sync(screen, 60, "the question in the list", satisfied=lambda shown: "Capital of Italy?" in shown)
    tmux("send-keys", "-t", SESSION, "4")
    eventually_sync(lambda: daemon.get(f"/reef/records/{receipt}")["reports"], 60, "the report from key 4")
    toast = f"scored {abbreviated(receipt)}: 0.75"  # names the record and the score sent
    eventually_sync(screen, 60, "the toast", satisfied=lambda shown: toast in shown)
    eventually_sync(screen, 60, "the score in the row", satisfied=lambda shown: "0.75" in shown)
    tmux("send-keys", "-t", SESSION, "?")
    eventually_sync(screen, 60, "the help screen", satisfied=lambda shown: "Everywhere" in shown)
    tmux("send-keys", "-t", SESSION, "Escape")
    eventually_sync(screen, 60, "the help closed", satisfied=lambda shown: "Everywhere" not in shown)
    tmux("send-keys", "-t", SESSION, "q")
    eventually_sync(lambda: subprocess.run(["tmux", "has-session", "-t", SESSION], capture_output=True).returncode != 0,
                    60, "the app to quit")  # fmt: skip
