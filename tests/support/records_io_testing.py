"""A daemon in the test's event loop for import and export tests: its HTTP client, its store, and the calls the
tests repeat (a batch of conversations, an export read as JSON lines)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
from aiohttp.test_utils import TestServer

from reef_daemon.context import DAEMON, Daemon


def conversation(question: str, answer: str, **extra: Any) -> dict[str, Any]:
    """A conversation of `POST /reef/records/batch`: one question, one answer."""
    messages = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return {"messages": messages, **extra}


@dataclass
class InProcessReef:
    server: TestServer
    client: httpx.AsyncClient

    @property
    def daemon(self) -> Daemon:
        return self.server.app[DAEMON]

    async def import_batch(self, scenario: str, conversations: list[Any]) -> dict[str, Any]:
        response = await self.client.post(
            "/reef/records/batch", json={"records": conversations}, headers={"x-reef-scenario": scenario}
        )
        assert response.status_code == 200, response.text
        ack: dict[str, Any] = response.json()
        return ack

    async def export(self, scenario: str, **params: str) -> list[dict[str, Any]]:
        response = await self.client.get("/reef/export", params={"scenario": scenario, **params})
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("application/x-ndjson")
        return [json.loads(line) for line in response.text.splitlines()]

    async def records(self, scenario: str) -> list[dict[str, Any]]:
        response = await self.client.get("/reef/records", params={"scenario": scenario, "limit": "500"})
        rows: list[dict[str, Any]] = response.json()["records"]
        return rows
