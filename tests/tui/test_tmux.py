"""`reef tui` started in tmux as a person would: keys typed with send-keys, the screen read with capture-pane."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support.tui_testing import Daemon, wait_until

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
    receipt = daemon.chat(question="What is the capital of Italy?")
    wait_until(lambda: "recipe record" in screen(), "the header line with the daemon's recipe", attempts=1200)
    wait_until(lambda: "chat" in screen(), "the record in the list")
    tmux("send-keys", "-t", SESSION, "4")
    wait_until(lambda: daemon.get(f"/reef/records/{receipt}")["reports"], "the report from key 4")
    wait_until(lambda: "0.75" in screen(), "the score in the row")
    tmux("send-keys", "-t", SESSION, "?")
    wait_until(lambda: "Everywhere" in screen(), "the help screen")
    tmux("send-keys", "-t", SESSION, "Escape")
    wait_until(lambda: "Everywhere" not in screen(), "the help closed")
    tmux("send-keys", "-t", SESSION, "q")
    wait_until(lambda: subprocess.run(["tmux", "has-session", "-t", SESSION], capture_output=True).returncode != 0,
               "the app to quit")  # fmt: skip
