"""Which daemon a client command talks to: `--url`, else `REEF_URL`, else the daemon `reef start` ran from this
directory, else the default address. The token comes from `--token`, else `REEF_TOKEN`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from reef_cli.state import DEFAULT_STATE_DIR, DaemonFiles

DEFAULT_URL = "http://127.0.0.1:8900"


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
    token = token or environ.get("REEF_TOKEN") or None
    if url:
        return Target(url.rstrip("/"), token, "--url")
    if environ.get("REEF_URL", "").strip():
        return Target(environ["REEF_URL"].strip().rstrip("/"), token, "REEF_URL")
    started = DaemonFiles(state_dir).url()
    if started:
        return Target(started, token, f"{state_dir}/")
    return Target(DEFAULT_URL, token, "default")
