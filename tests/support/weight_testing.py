"""What weight-recipe tests share: a handle on a daemon serving the embedded model."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from aiohttp.test_utils import TestServer

from reef_daemon.context import DAEMON, Daemon

SCENARIO = "toy"


class WeightReef:
    def __init__(self, server: TestServer, client: httpx.AsyncClient) -> None:
        self.server = server
        self.client = client

    @property
    def daemon(self) -> Daemon:
        return self.server.app[DAEMON]

    async def ask(self, question: str, **params: Any) -> tuple[str, dict[str, Any]]:
        """Ask through the proxy as a client would; returns (receipt, record)."""
        body = {"model": "smollm2", "messages": [{"role": "user", "content": question}], "max_tokens": 8, **params}
        response = await self.client.post("/v1/chat/completions", json=body, headers={"x-reef-scenario": SCENARIO})
        assert response.status_code == 200, response.text
        receipt = response.headers["x-reef-agent-record-id"]
        return receipt, await self.record(receipt)

    async def record(self, record_id: str) -> dict[str, Any]:
        response = await self.client.get(f"/reef/records/{record_id}")
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    async def report(self, body: dict[str, Any]) -> str:
        response = await self.client.post("/reef/report", json=body, headers={"x-reef-scenario": SCENARIO})
        assert response.status_code == 200, response.text
        return str(response.json()["agent_record_id"])

    async def training(self) -> dict[str, Any]:
        status = (await self.client.get("/reef/status")).json()
        return dict(status["training"]["scenarios"].get(SCENARIO, {}))


StartWeightReef = Callable[..., Awaitable[WeightReef]]
