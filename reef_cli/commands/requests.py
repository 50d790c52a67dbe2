"""`reef requests ID`: where a change request stands; with --wait, watch it until it settles (as `reef request
--wait` does, without filing a new request)."""

from __future__ import annotations

from typing import Annotated

import typer

from reef_cli.commands.request import settle, watch
from reef_cli.connect import daemon_client
from reef_cli.options import JsonOption, TokenOption, UrlOption

EXAMPLE = "Example: reef requests 0b5e7c2a9d4f4e1c8a3b6d2f7e9c1a40 --wait"


def requests(
    request_id: Annotated[str, typer.Argument(help="The request's id, as `reef request` printed it.")],
    wait: Annotated[bool, typer.Option("--wait", help="Watch the request until it settles.")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds --wait waits before giving up (exit 2).")] = 1800,
    json: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Show a change request's state, or its result once settled. Exit 0 published, 1 rejected or skipped,
    2 still running."""
    with daemon_client(url, token) as client:
        progress = watch(client, request_id, timeout, quiet=json) if wait else client.request_progress(request_id)
    settle(progress, json=json)
