"""Running `reef serve` in the background for `reef start`, and stopping it for `reef stop`."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reef_cli.state import DaemonFiles, process_alive
from reef_client import DaemonUnreachable, ReefClient, ReefClientError
from reef_contract import loopback_url

START_TIMEOUT_S = 180.0  # the embedded model's first load takes ~30 s on two cores; leave room
STOP_TIMEOUT_S = 45.0  # the daemon gives in-flight requests 30 s to finish
POLL_S = 0.1
_LISTENING = re.compile(r"listening on (http://\S+)")


class StartFailed(Exception):
    """The background daemon exited or never answered; the message says why and quotes its log."""


@dataclass(frozen=True)
class Started:
    """A daemon running in the background: its pid and URL."""

    pid: int
    url: str


def start_daemon(files: DaemonFiles, serve_args: list[str], host: str, port: int) -> Started:
    """Run `reef serve <serve_args>` detached, its output appended to the log; return once `/healthz` answers."""
    if port and _taken(loopback_url(host, port)):
        raise StartFailed(
            f"something already answers at {loopback_url(host, port)}; stop it, or choose another port with --reef.port"
        )
    files.state_dir.mkdir(parents=True, exist_ok=True)
    with files.log_file.open("ab") as log:
        log_start = log.tell()
        process = subprocess.Popen(
            [sys.executable, "-m", "reef_cli", "serve", *serve_args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in this terminal must not reach the daemon
        )
    files.write_pid(process.pid)
    try:
        url = _wait_healthy(process, files.log_file, log_start, host, port)
    except BaseException:
        _terminate(process)
        files.clear()
        raise
    # The daemon wrote its own address before it answered /healthz (reef serve does, once it listens).
    # It outlives this command; mark it handled so Popen does not warn that it is still running.
    process.returncode = 0
    return Started(process.pid, url)


def _wait_healthy(process: subprocess.Popen[bytes], log_file: Path, log_start: int, host: str, port: int) -> str:
    """The daemon's URL once it said it listens (in its own log, so no other server is mistaken for it) and
    `/healthz` answers there."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise StartFailed(f"the daemon exited with status {process.returncode}:\n{_log_tail(log_file, log_start)}")
        listening = _LISTENING.search(_log_since(log_file, log_start))
        if listening is not None:
            url = loopback_url(host, port or int(listening.group(1).rsplit(":", 1)[1]))
            if _answers(url):
                return url
        time.sleep(POLL_S)
    raise StartFailed(
        f"the daemon did not answer /healthz within {START_TIMEOUT_S:g} s:\n{_log_tail(log_file, log_start)}"
    )


def _answers(url: str) -> bool:
    """Whether a healthy reef answers /healthz at `url`."""
    with ReefClient(url, timeout_s=2.0) as client:
        try:
            return client.healthz()
        except ReefClientError:  # nothing listens yet, or something that is not reef (yet) answers
            return False


def _taken(url: str) -> bool:
    """Whether any server answers at `url`: a reef, or another web server that answers /healthz with an error."""
    with ReefClient(url, timeout_s=2.0) as client:
        try:
            client.healthz()
        except DaemonUnreachable:
            return False
        except ReefClientError:
            pass  # an answer all the same
        return True


def stop_daemon(pid: int, on_wait: Callable[[], None] | None = None) -> bool:
    """SIGTERM the daemon and wait for it to finish; SIGKILL after STOP_TIMEOUT_S. True when it stopped cleanly."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        if not process_alive(pid):
            return True
        if on_wait is not None:
            on_wait()
        time.sleep(POLL_S)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    return False


def is_reef_daemon(pid: int) -> bool:
    """Whether the process looks like a `reef serve` (guards against a pid reused by something else)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # no /proc here (macOS): trust the pid file
    return b"serve" in command and any(b"reef" in part for part in command)


def _terminate(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _log_since(log_file: Path, offset: int) -> str:
    try:
        with log_file.open("rb") as log:
            log.seek(offset)
            return log.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _log_tail(log_file: Path, offset: int, lines: int = 20) -> str:
    text = _log_since(log_file, offset).strip()
    tail = text.splitlines()[-lines:]
    return "\n".join(f"  {line}" for line in tail) if tail else f"  (nothing in {log_file})"
