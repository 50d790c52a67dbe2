"""A daemon serving the real embedded model, driven from the test thread, and what its records must hold."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from reef_daemon.runtimes.embedded import EmbeddedRuntime

T = TypeVar("T")
SCENARIO = "embedded-test"
QUESTION = "What is the capital of France?"


@dataclass
class RunningReef:
    """A daemon serving the embedded model on a free port, its event loop in another thread."""

    url: str
    runtime: EmbeddedRuntime
    loop: asyncio.AbstractEventLoop

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the daemon's event loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=120)

    def record(self, record_id: str) -> dict[str, Any]:
        response = httpx.get(f"{self.url}/reef/records/{record_id}", timeout=30)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def records(self, scenario: str) -> list[dict[str, Any]]:
        response = httpx.get(f"{self.url}/reef/records", params={"scenario": scenario}, timeout=30)
        assert response.status_code == 200, response.text
        rows: list[dict[str, Any]] = response.json()["records"]
        return rows


def assert_token_data(record: dict[str, Any]) -> dict[str, Any]:
    """The record holds prompt ids, output ids, one log-prob and one weight version per output token."""
    tokens = record.get("tokens")
    assert tokens, record
    assert tokens["prompt_ids"] and all(isinstance(t, int) for t in tokens["prompt_ids"])
    count = len(tokens["output_ids"])
    assert count > 0
    assert len(tokens["logprobs"]) == count and all(p <= 0.0 for p in tokens["logprobs"])
    assert len(tokens["versions"]) == count
    assert record["release"] == tokens["versions"][-1]
    data: dict[str, Any] = tokens
    return data
