"""`reef request`: file a change request for a scenario's harness; with --wait, watch it to the end and say how to
use the result. `reef evolve`, its first name, still works."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from reef_cli.connect import daemon_client
from reef_cli.options import JsonOption, TokenOption, UrlOption
from reef_cli.output import console, error_console, print_json
from reef_client import Activity, ReefClient, RequestProgress, follow_request, request_outcome, request_status

EXAMPLE = 'Example: reef request "add a /changelog command that drafts release notes" --scenario my-harness --wait'

ScenarioOption = Annotated[
    str, typer.Option("--scenario", "-s", help="The scenario whose harness to change.", show_default=False)
]


def request(
    text: Annotated[str, typer.Argument(help="What to change, in your own words (at most 4000 characters).")],
    scenario: ScenarioOption,
    wait: Annotated[bool, typer.Option("--wait", help="Watch the request until it settles.")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds --wait waits before giving up (exit 2).")] = 1800,
    json: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """File a change request: ask reef's proposer for a harness change, in your own words. Exit 0 published, 1
    rejected or skipped, 2 still running."""
    with daemon_client(url, token, scenario) as client:
        filed = client.file_request(scenario, text)
        request_id = str(filed["agent_record_id"])
        if not wait:
            if json:
                print_json(filed)
            else:
                console().print(f"request {request_id} queued; its progress: {filed['progress_path']}", soft_wrap=True)
            return
        progress = watch(client, request_id, timeout, quiet=json)
    settle(progress, json=json)


def settle(progress: RequestProgress, *, json: bool) -> None:
    """Print where the request stands and exit: 0 published, 1 rejected or skipped, 2 still running."""
    if json:
        print_json(progress)
    else:
        out = console()
        for line in request_outcome(progress):
            out.print(line, soft_wrap=True)
    status = request_status(progress)
    if status:
        raise typer.Exit(status)


def watch(client: ReefClient, request_id: str, timeout: float, *, quiet: bool) -> RequestProgress:
    """Poll the request until it settles or the timeout passes. Each activity line (for the agent proposer each
    tool call, check and trial) is printed on stderr as it comes; a spinner shows the phase and the latest one."""
    out = error_console()
    with out.status("queued", spinner="dots") as spinner:

        def show(progress: RequestProgress, new: list[Activity]) -> None:
            for entry in new:
                out.print(f"· {entry['text']}", soft_wrap=True, markup=False)
            latest = progress["activity"][-1]["text"] if progress["activity"] else ""
            spinner.update(Text(f"{progress['state']}: {latest}"[:160]))

        return follow_request(client, request_id, timeout, None if quiet else show)
