"""What TUI tests share: a daemon `reef start` ran in front of a fake model, and waiting inside a Pilot test for
something the app shows, never for a length of time."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web
from textual.pilot import Pilot

ATTEMPTS = 1200

REEF = [sys.executable, "-m", "reef_cli"]
CHAT = {"model": "fake-model", "messages": [{"role": "user", "content": "What is the capital of France?"}]}


class ModelThread:
    """A fake model server on a loopback port, served from a thread with its own event loop."""

    def __init__(self, app: web.Application) -> None:
        self.loop = asyncio.new_event_loop()
        self.runner = web.AppRunner(app)
        self.url = ""
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self) -> str:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(timeout=30)
        return self.url

    async def _start(self) -> None:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        self.loop.close()


@dataclass
class Daemon:
    """A daemon `reef start` ran in `workdir`."""

    workdir: Path
    url: str
    env: dict[str, str]

    def reef(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*REEF, *args], cwd=self.workdir, env=self.env, capture_output=True, text=True, timeout=120
        )

    def chat(self, scenario: str = "demo", question: str | None = None) -> str:
        """One chat completion through the daemon, as an agent would send it; returns the receipt."""
        body: dict[str, Any] = dict(CHAT)
        if question is not None:
            body["messages"] = [{"role": "user", "content": question}]
        answer = httpx.post(
            f"{self.url}/v1/chat/completions", json=body, headers={"x-reef-scenario": scenario}, timeout=30
        )
        assert answer.status_code == 200, answer.text
        return answer.headers["x-reef-agent-record-id"]

    def get(self, path: str, **params: str) -> Any:
        answer = httpx.get(f"{self.url}{path}", params=params, timeout=30)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def post(self, path: str, body: Any, scenario: str | None = None) -> Any:
        headers = {"x-reef-scenario": scenario} if scenario else {}
        answer = httpx.post(f"{self.url}{path}", json=body, headers=headers, timeout=30)
        assert answer.status_code < 300, answer.text
        return answer.json()

    def reports(self, scenario: str = "demo") -> list[dict[str, Any]]:
        """The report records the daemon lists, newest first."""
        return list(self.get("/reef/records", type="report", scenario=scenario)["records"])

    def stop(self) -> None:
        stopped = self.reef("stop")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr


def clean_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("REEF_")}
    env.update(COLUMNS="200", TZ="UTC")
    return env


def start_daemon(workdir: Path, upstream_url: str, *extra: str, port: int = 0) -> Daemon:
    """`reef start` on `port` (0: a free one); `extra` are more serve settings."""
    env = clean_env()
    args = ["start", "--inference.upstream-url", upstream_url, "--reef.port", str(port), "--reef.state-dir", ".reef"]
    args += extra
    started = subprocess.run([*REEF, *args], cwd=workdir, env=env, capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stdout + started.stderr
    return Daemon(workdir, (workdir / ".reef" / "daemon.url").read_text().strip(), env)


def wait_until(condition: Callable[[], Any], what: str, attempts: int = 600, pause_s: float = 0.05) -> Any:
    """Poll `condition` (outside the app) until it is truthy; fail naming `what`."""
    for _ in range(attempts):
        value = condition()
        if value:
            return value
        time.sleep(pause_s)
    raise AssertionError(f"gave up waiting for {what}")


async def until(pilot: Pilot[Any], condition: Callable[[], Any], what: str) -> Any:
    """Let the app run until `condition()` is truthy; fail naming `what` if it never is."""
    for _ in range(ATTEMPTS):
        value = condition()
        if value:
            return value
        await pilot.pause(0.05)
    raise AssertionError(f"gave up waiting for {what}")
