"""What the CLI tests share, and the TUI tests through tui_testing: a fake model on a thread of its own, a daemon
run with `reef start`, and running `reef` as a subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web

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
        port = self.runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        self.loop.close()


@dataclass
class Daemon:
    """A daemon `reef start` ran in `workdir`, and how to reach it."""

    workdir: Path
    url: str
    env: dict[str, str]

    def reef(self, *args: str, input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run `reef ARGS` as a subprocess in the daemon's directory."""
        return run_reef(self.workdir, self.env, *args, input=input, timeout=timeout)

    def chat(self, scenario: str = "demo", question: str | None = None, *, stream: bool = False) -> str:
        """One chat completion through the daemon, as an agent would send it; returns its receipt."""
        body: dict[str, Any] = {**CHAT, "stream": stream}
        if question is not None:
            body["messages"] = [{"role": "user", "content": question}]
        headers = {"x-reef-scenario": scenario}
        if not stream:
            response = httpx.post(f"{self.url}/v1/chat/completions", json=body, headers=headers, timeout=30)
            assert response.status_code == 200, response.text
            return response.headers["x-reef-agent-record-id"]
        text = httpx.post(f"{self.url}/v1/chat/completions", json=body, headers=headers, timeout=30).text
        marker = '"agent_record_id":"'
        assert marker in text, text
        return text.split(marker, 1)[1][:32]

    def get(self, path: str, **params: str) -> Any:
        response = httpx.get(f"{self.url}{path}", params=params, timeout=30)
        assert response.status_code == 200, response.text
        return response.json()

    def post(self, path: str, body: Any, scenario: str | None = None) -> Any:
        headers = {"x-reef-scenario": scenario} if scenario else {}
        response = httpx.post(f"{self.url}{path}", json=body, headers=headers, timeout=30)
        assert response.status_code < 300, response.text
        return response.json()

    def record(self, receipt: str) -> dict[str, Any]:
        record: dict[str, Any] = self.get(f"/reef/records/{receipt}")
        return record

    def reports(self, scenario: str | None = None) -> list[dict[str, Any]]:
        """The report records the daemon lists (of `scenario`, else of all), newest first."""
        rows: list[dict[str, Any]] = self.get(
            "/reef/records", type="report", limit="500", **({"scenario": scenario} if scenario else {})
        )["records"]
        return rows

    def stop(self) -> None:
        """`reef stop`; if that failed, kill the recorded pid so no daemon outlives the tests."""
        pid_file = self.workdir / ".reef" / "daemon.pid"
        pid = int(pid_file.read_text()) if pid_file.exists() else None
        stopped = self.reef("stop", "--state-dir", ".reef")
        if stopped.returncode != 0 and pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr


def default_sigint() -> None:
    """Give a child the default SIGINT (Ctrl-C) handling: a child of a background job inherits SIGINT as ignored
    (POSIX shells do that), and a test that stops its child with SIGINT would then wait for it forever."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any REEF_ variable, plus `extra`; the checkout is importable, so a daemon
    started with it can load a recipe from `tests.support`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("REEF_")}
    checkout = str(Path(__file__).resolve().parents[2])
    env.update(COLUMNS="200", PYTHONPATH=os.pathsep.join(filter(None, [checkout, env.get("PYTHONPATH")])), **extra)
    return env


def run_reef(
    workdir: Path, env: dict[str, str], *args: str, input: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*REEF, *args], cwd=workdir, env=env, input=input, capture_output=True, text=True, timeout=timeout
    )


def start_daemon(
    workdir: Path, upstream_url: str, *extra: str, env: dict[str, str] | None = None, port: int = 0
) -> Daemon:
    """`reef start` in `workdir` on `port` (0: a free one, which the daemon reports) with `env` (else clean_env());
    `extra` are more serve settings."""
    env = clean_env() if env is None else env
    started = run_reef(
        workdir, env, "start", "--inference.upstream-url", upstream_url, "--reef.port", str(port), *extra
    )
    assert started.returncode == 0, started.stdout + started.stderr
    url = (workdir / ".reef" / "daemon.url").read_text().strip()
    return Daemon(workdir, url, env)
