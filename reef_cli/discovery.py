"""Which daemon a client command talks to: `--url`, else `REEF_URL`, else the daemon running from this directory
(`reef start` or `reef serve` here, state in `.reef` or a recipe's `.reef/<recipe>`), else the default address.
The token comes from `--token`, else `REEF_TOKEN`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from reef_cli.state import running_here
from reef_daemon.contract import DEFAULT_STATE_DIR, DEFAULT_URL, TOKEN_ENV, URL_ENV


class SeveralDaemons(Exception):
    """More than one daemon runs from this directory; the message names them and how to choose."""


@dataclass(frozen=True)
class Target:
    """A daemon to talk to, and where its address came from (said in error messages)."""

    url: str
    token: str | None
    source: str


def find_daemon(
    url: str | None = None,
    token: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    state_dir: Path = DEFAULT_STATE_DIR,
) -> Target:
    """Resolve the daemon's URL and token in the documented order."""
    environ = os.environ if environ is None else environ
    token = token or environ.get(TOKEN_ENV) or None
    if url:
        return Target(url.rstrip("/"), token, "--url")
    if environ.get(URL_ENV, "").strip():
        return Target(environ[URL_ENV].strip().rstrip("/"), token, URL_ENV)
    running = running_here(state_dir)
    if len(running) > 1:
        listed = ", ".join(f"{files.url()} ({files.state_dir})" for files in running)
        raise SeveralDaemons(f"several daemons run from this directory: {listed}; choose one with --url")
    if running:
        return Target(str(running[0].url()), token, f"{running[0].state_dir}/")
    return Target(DEFAULT_URL, token, "default")
