"""What daemon tests share: a handle on a running reef app and the requests they send."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from reef_daemon.context import DAEMON, Daemon
from tests.support.fake_upstream import FakeUpstream

SCENARIO = "demo"
CHAT = {"model": "fake-model", "messages": [{"role": "user", "content": "What is the capital of France?"}]}


@dataclass
class Reef:
    url: str
    server: TestServer
    upstream: FakeUpstream
    session: aiohttp.ClientSession

    @property
    def daemon(self) -> Daemon:
        return self.server.app[DAEMON]

    def headers(self, scenario: str = SCENARIO, **extra: str) -> dict[str, str]:
        return {"x-reef-scenario": scenario, **extra}

    async def post(
        self,
        path: str,
        body: Any = None,
        *,
        scenario: str | None = SCENARIO,
        headers: dict[str, str] | None = None,
        data: bytes | None = None,
    ) -> aiohttp.ClientResponse:
        sent = {"x-reef-scenario": scenario} if scenario is not None else {}
        sent.update(headers or {})
        if data is None:
            return await self.session.post(self.url + path, json=body, headers=sent)
        return await self.session.post(self.url + path, data=data, headers=sent)

    async def get(self, path: str, **kwargs: Any) -> aiohttp.ClientResponse:
        return await self.session.get(self.url + path, **kwargs)

    async def record(self, record_id: str) -> dict[str, Any]:
        response = await self.get(f"/reef/records/{record_id}")
        assert response.status == 200, await response.text()
        body: dict[str, Any] = await response.json()
        return body

    async def records(self, **query: str) -> list[dict[str, Any]]:
        response = await self.get("/reef/records", params=query)
        assert response.status == 200, await response.text()
        page: dict[str, Any] = await response.json()
        return list(page["records"])


StartReef = Callable[..., Awaitable[Reef]]
