"""What reefine tests share: a handle on a running reefine daemon, filing requests and waiting for them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from tests.support.fake_proposer_model import FakeProposerModel
from tests.support.fake_upstream import FakeUpstream
from tests.support.scripted_agent import ScriptedAgent
from tests.support.waiting import eventually

SCENARIO = "harness"
AGENT_SETTLES_S = 240  # a request the agent proposer answers: a whole agent session, with trials


@dataclass
class Reefine:
    url: str
    server: TestServer
    model: FakeProposerModel
    session: aiohttp.ClientSession
    token: str | None = None
    agent: ScriptedAgent | None = None
    agents: FakeUpstream | None = None  # what answers the agents' own model calls (trials, the gate's runs)

    def headers(self) -> dict[str, str]:
        return {"x-reef-scenario": SCENARIO}

    async def call(self, method: str, path: str, body: Any = None, scenario: str | None = SCENARIO) -> Any:
        headers = {"x-reef-scenario": scenario} if scenario else {}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        async with self.session.request(method, self.url + path, json=body, headers=headers) as response:
            return response.status, await response.json()

    async def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = await self.call(method, path, body)
        assert status < 300, answer
        return answer

    async def train(self, text: str, **extra: Any) -> str:
        status, answer = await self.call("POST", "/reef/train", {"text": text, **extra})
        assert status == 202, answer
        return str(answer["agent_record_id"])

    async def settled(self, request_id: str, seconds: float = 60) -> dict[str, Any]:
        """The request's progress once it has settled."""
        progress: dict[str, Any] = await eventually(
            lambda: self.ok("GET", f"/reef/requests/{request_id}"),
            seconds,
            f"request {request_id} to settle",
            satisfied=lambda request: request["state"] == "settled",
        )
        return progress

    async def releases(self) -> list[dict[str, Any]]:
        return list((await self.ok("GET", f"/reef/scenarios/{SCENARIO}/releases"))["releases"])


StartReefine = Callable[..., Awaitable[Reefine]]


def activity(progress: dict[str, Any]) -> list[str]:
    """The lines of a request's progress."""
    return [str(line["text"]) for line in progress["activity"]]


def processes_with(marker: str) -> list[int]:
    """Processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode("utf-8", "replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found
