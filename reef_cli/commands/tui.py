"""`reef tui`: the terminal app; and whether a bare `reef` should open it (a terminal, and a daemon answering)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from reef_cli.connect import found_daemon
from reef_cli.discovery import BadDaemonUrl, SeveralDaemons, find_daemon
from reef_cli.options import TokenOption, UrlOption
from reef_cli.output import fail
from reef_client import ReefClient, ReefClientError, UnknownScenario, require_scenario

EXAMPLE = "Example: reef tui --scenario demo   (inside: ? for help, ctrl+p for every action)"
PROBE_TIMEOUT_S = 1.0

ScenarioOption = Annotated[
    str | None,
    typer.Option("--scenario", help="Show this scenario (s switches inside). Else every scenario.", show_default=False),
]


def tui(url: UrlOption = None, token: TokenOption = None, scenario: ScenarioOption = None) -> None:
    """Watch records live, score them with one key, ask for harness changes, browse and install versions.

    Finds the daemon from --url, REEF_URL, this directory or the default; reconnects by itself when it goes away.
    """
    open_tui(url, token, scenario)


def open_tui(url: str | None = None, token: str | None = None, scenario: str | None = None) -> None:
    """Run the app until the person quits it."""
    from reef_tui import ReefApp  # textual loads only when the app is opened

    target = found_daemon(url, token)
    if scenario is not None:
        _check_scenario(target.url, target.token, scenario)
    ReefApp(target.url, target.token, scenario=scenario).run()


def _check_scenario(url: str, token: str | None, scenario: str) -> None:
    """Exit 2 when the daemon answers and has no such scenario; a daemon not up yet is the app's to wait for."""
    try:
        with ReefClient(url, token, timeout_s=PROBE_TIMEOUT_S) as client:
            require_scenario(client, scenario)
    except UnknownScenario as exc:
        fail(str(exc), 2)
    except ReefClientError:
        return


def bare_reef_opens_tui() -> bool:
    """A bare `reef` opens the app when it runs on a terminal and a daemon answers; otherwise it prints help."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return False
    try:
        target = find_daemon()
    except (SeveralDaemons, BadDaemonUrl):
        return False
    try:
        with ReefClient(target.url, target.token, timeout_s=PROBE_TIMEOUT_S) as client:
            return client.healthz()
    except ReefClientError:
        return False
