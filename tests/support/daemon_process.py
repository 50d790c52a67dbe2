"""`reef serve` run as a process of its own, on a free port, its output in a log file: for tests that restart,
signal or kill -9 a daemon."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp

from tests.support.waiting import eventually

REEF = [sys.executable, "-m", "reef_cli"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class DaemonProcess:
    def __init__(self, config: Path, log: Path, env: dict[str, str] | None = None) -> None:
        self.config, self.log_path = config, log
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        environment = {k: v for k, v in os.environ.items() if not k.startswith("REEF_")}
        environment.update(env or {})
        self.log = log.open("ab")
        self.process = subprocess.Popen(
            [*REEF, "serve", "-c", str(config), "--reef.port", str(self.port)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=environment,
        )

    async def ready(self, session: aiohttp.ClientSession) -> None:
        async def health() -> str:
            if self.process.poll() is not None:
                return "exited"
            try:
                async with session.get(self.url + "/healthz") as response:
                    return "ready" if response.status == 200 else f"HTTP {response.status}"
            except aiohttp.ClientConnectionError:
                return "not listening"

        try:
            state = await eventually(
                health, 60, "reef to answer /healthz", satisfied=lambda s: s in ("ready", "exited")
            )
        except AssertionError as slow:
            raise AssertionError(f"{slow}\n{self.output()}") from None
        assert state == "ready", f"reef exited early:\n{self.output()}"

    def output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        code = self.process.wait(timeout=30)
        self.log.close()
        return code
