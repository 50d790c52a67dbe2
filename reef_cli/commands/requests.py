"""`reef requests ID`: where a change request stands; with --wait, watch it until it settles (as `reef request
--wait` does, without filing a new request). `reef requests` alone lists the recent requests."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer
from rich.table import Table

from reef_cli.commands.request import settle, watch
from reef_cli.connect import daemon_client
from reef_cli.options import JsonOption, TimeoutOption, TokenOption, UrlOption, WaitOption
from reef_cli.output import console, error_console, print_json
from reef_client import ReefClient, RequestProgress, wait_again, wait_bound

EXAMPLE = "Example: reef requests 0b5e7c2a9d4f4e1c8a3b6d2f7e9c1a40 --wait   (or reef requests: the recent ones)"
LISTED = 20  # requests `reef requests` lists, the newest


def requests(
    request_id: Annotated[
        str | None,
        typer.Argument(help="The request's id, as `reef request` printed it; without it, the recent requests."),
    ] = None,
    scenario: Annotated[
        str | None, typer.Option("--scenario", "-s", help="Without an id: only this scenario's.", show_default=False)
    ] = None,
    wait: WaitOption = False,
    timeout: TimeoutOption = None,
    json: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Show a change request's state, or its result once settled. Exit 0 published, 1 rejected or skipped,
    2 still running. Without an id, list the recent requests, newest first (--json: one per line)."""
    if request_id is None:
        with daemon_client(url, token, scenario) as client:
            _list(client, scenario, json=json)
        return
    with daemon_client(url, token) as client:
        if wait:
            progress = watch(client, request_id, wait_bound(timeout, client.status()["runtime"]), quiet=json)
        else:
            progress = client.request_progress(request_id)
    settle(progress, json=json, again=wait_again(request_id, url))


def _list(client: ReefClient, scenario: str | None, *, json: bool) -> None:
    rows = client.records(scenario=scenario, type="request", limit=LISTED)["records"]
    found = [client.request_progress(row["id"]) for row in rows]
    if json:
        for progress in found:
            print_json(progress)
        return
    if not found:
        error_console().print("no requests yet: file one with `reef request TEXT --scenario NAME`")
        return
    console().print(requests_table(found))


def requests_table(found: list[RequestProgress]) -> Table:
    """One row per request. On a narrow terminal its words, date and scenario wrap (a long name folds); the id
    (which `reef requests ID` takes), state and version are never cut."""
    table = Table(box=None, padding=(0, 1, 0, 0), pad_edge=False)
    for column in ("id", "filed", "scenario", "state", "version", "request"):
        table.add_column(column, no_wrap=column in ("id", "state", "version"), min_width=6)
    table.columns[2].overflow = "fold"
    for progress in found:
        table.add_row(progress["id"], _when(progress), progress["scenario"], _state(progress),
                      progress.get("version") or "-", progress["text"] or "-")  # fmt: skip
    return table


def _when(progress: RequestProgress) -> str:
    return datetime.fromtimestamp(progress["created_at"]).strftime("%b %d %H:%M")


def _state(progress: RequestProgress) -> str:
    """`queued`, `proposing`, ... while it runs; its result once settled."""
    settled = progress["state"] == "settled"
    return (progress.get("result") or progress["state"]) if settled else progress["state"]
