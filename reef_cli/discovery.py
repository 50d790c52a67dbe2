"""Which daemon a client command talks to: `--url`, else `REEF_URL`, else the daemon running from this directory
(`reef start` or `reef serve` here, state in `.reef` or a recipe's `.reef/<recipe>`), else the default address.
The token comes from `--token`, else `REEF_TOKEN`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from reef_cli.state import running_here
from reef_contract import DEFAULT_STATE_DIR, DEFAULT_URL, TOKEN_ENV, URL_ENV


class SeveralDaemons(Exception):
    """More than one daemon runs from this directory; the message names them and how to choose."""


class BadDaemonUrl(Exception):
    """The daemon's URL is not an http:// or https:// URL; the message names where it came from."""


@dataclass(frozen=True)
class Target:
    """A daemon to talk to, and where its address came from (said in error messages)."""

    url: str
    token: str | None
    source: str


def daemon_url(given: str, source: str) -> str:
    """`given` as the daemon's base URL: `127.0.0.1:8900` means `http://127.0.0.1:8900`; any scheme but http and
    https is refused (BadDaemonUrl, naming `source`)."""
    text = given.strip().rstrip("/")
    if "://" not in text:
        text = f"http://{text}"
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadDaemonUrl(f"{source} must be an http:// or https:// URL such as {DEFAULT_URL}, not '{given}'")
    if parts.path.rstrip("/").endswith("/v1"):
        # The SDK habit: an OpenAI or Anthropic client's base URL ends in /v1; reef's own routes do not.
        bare = text.rstrip("/").removesuffix("/v1")
        raise BadDaemonUrl(
            f"{source} is the daemon's address without /v1 (the SDKs' base URL adds it; reef's own routes have "
            f"none): use {bare}"
        )
    return text


def find_daemon(
    url: str | None = None,
    token: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    state_dir: Path = DEFAULT_STATE_DIR,
) -> Target:
    """Resolve the daemon's URL and token in the documented order; SeveralDaemons when several run here."""
    found = find_daemons(url, token, environ=environ, state_dir=state_dir)
    if len(found) > 1:
        listed = ", ".join(f"{target.url} ({target.source.rstrip('/')})" for target in found)
        raise SeveralDaemons(f"several daemons run from this directory: {listed}; choose one with --url")
    return found[0]


def find_daemons(
    url: str | None = None,
    token: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    state_dir: Path = DEFAULT_STATE_DIR,
) -> list[Target]:
    """Every daemon the documented order names: the one `--url` or `REEF_URL` gives, else each daemon running
    from this directory, else the default address."""
    environ = os.environ if environ is None else environ
    token = token or environ.get(TOKEN_ENV) or None
    if url:
        return [Target(daemon_url(url, "--url"), token, "--url")]
    if environ.get(URL_ENV, "").strip():
        return [Target(daemon_url(environ[URL_ENV], URL_ENV), token, URL_ENV)]
    running = running_here(state_dir)
    if running:
        return [Target(str(files.url()), token, f"{files.state_dir}/") for files in running]
    return [Target(DEFAULT_URL, token, "default")]
