"""The agent proposer's activity, as a person sees it while the request runs: `reef request --wait` prints each
tool call, check and trial as it comes, and the TUI's requests screen shows them live, from
`GET /reef/requests/{id}`."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from reef_cli.app import app
from reef_tui import ReefApp
from reef_tui.screens.requests import RequestsScreen
from reef_tui.widgets.request_view import RequestView
from tests.support.reefine_testing import AGENT_SETTLES_S, SCENARIO, StartReefine
from tests.support.waiting import eventually

SESSION = [
    "printf '# Be brief\\nAnswer in one sentence.\\n' > 'skills/be brief!.md'",
    "harness-check",
    "mv 'skills/be brief!.md' skills/brief.md && printf 'Brief.\\n\\nHow to use: just ask.' > design.md",
    "harness-trial 'What is the capital of France?' --expect Paris",
]
# What the person sees: each of the agent's tool calls (read from its session log, so they may come a little
# after what the tools report), the check's refusal, and the trial as it starts and as it ends.
CALLS = [
    'agent: bash {"command": "printf',
    'agent: bash {"command": "harness-check"}',
    'agent: bash {"command": "mv',
    'agent: bash {"command": "harness-trial',
]
TOOLS = [
    "harness-check: refused (1): entry id 'be brief!' is not allowed",
    "harness-trial (1 of 10, at most 120 s): What is the capital of France?",
    "harness-trial: expect matched",
]
PROPOSER = "proposer: the agent proposer: pi"


def in_order(text: str, parts: list[str]) -> bool:
    at = 0
    for part in parts:
        at = text.find(part, at)
        if at < 0:
            return False
    return True


def all_seen(text: str, prefix: str = "") -> bool:
    """The proposer line, then every tool call in order, and every tool line in order."""
    at = text.find(prefix + PROPOSER)
    if at < 0:
        return False
    after = text[at:]
    return in_order(after, [prefix + line for line in CALLS]) and in_order(after, [prefix + line for line in TOOLS])


async def test_reef_request_wait_prints_each_tool_call_check_and_trial(start_reefine: StartReefine, pi: Path) -> None:
    reefine = await start_reefine(harness__proposer_agent="pi")
    assert reefine.agent is not None
    reefine.agent.commands = SESSION

    args = ["request", "make answers brief", "--scenario", SCENARIO, "--wait", "--url", reefine.url]
    result = await asyncio.to_thread(CliRunner().invoke, app, args)

    assert result.exit_code == 0, result.output
    assert all_seen(result.output, "· "), result.output
    assert in_order(result.output, [f"· {TOOLS[-1]}", "· agent stopped after", "selected: v1", "How to use: just ask."])


def shown(view: RequestView) -> str:
    console = Console(width=300, file=io.StringIO(), record=True)
    console.print(view.content)
    return console.export_text()


async def test_the_requests_screen_shows_the_agents_activity_while_it_runs(
    start_reefine: StartReefine, pi: Path
) -> None:
    reefine = await start_reefine(harness__proposer_agent="pi")
    assert reefine.agent is not None
    reefine.agent.commands = SESSION
    reefine.agent.hold = asyncio.Event()  # the agent's last turn waits until the screen has been looked at
    request_id = await reefine.train("make answers brief")

    tui = ReefApp(reefine.url, scenario=SCENARIO)
    async with tui.run_test(size=(160, 60)) as pilot:
        await eventually(lambda: tui.connected, 60, "the daemon to answer", pause=pilot.pause)
        await pilot.press("e")
        screen = await eventually(
            lambda: isinstance(tui.screen, RequestsScreen) and tui.screen, 60, "requests", pause=pilot.pause
        )
        view = screen.query_one(RequestView)
        live = await eventually(
            lambda: shown(view), AGENT_SETTLES_S, "the trial on screen", pause=pilot.pause,
            satisfied=all_seen,
        )  # fmt: skip
        assert screen.progress[request_id]["state"] == "proposing", live
        reefine.agent.hold.set()
        await eventually(
            lambda: shown(view), AGENT_SETTLES_S, "the result on screen", pause=pilot.pause,
            satisfied=lambda text: in_order(text, ["result", "selected", "agent stopped after"]),
        )  # fmt: skip
