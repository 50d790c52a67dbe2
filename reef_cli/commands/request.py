"""`reef request`: file a change request for a scenario's harness; with --wait, watch it to the end and say how to
use the result. `reef evolve`, its first name, still works."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from reef_cli.connect import daemon_client
from reef_cli.options import JsonOption, TimeoutOption, TokenOption, UrlOption, WaitOption
from reef_cli.output import console, error_console, print_json
from reef_client import (
    Activity,
    ProgressLines,
    ReefClient,
    RequestProgress,
    follow_request,
    request_outcome,
    request_status,
    small_model_caution,
    wait_again,
    wait_bound,
)

EXAMPLE = 'Example: reef request "add a /changelog command that drafts release notes" --scenario my-harness --wait'

ScenarioOption = Annotated[
    str, typer.Option("--scenario", "-s", help="The scenario whose harness to change.", show_default=False)
]


def request(
    text: Annotated[str, typer.Argument(help="What to change, in your own words (at most 4000 characters).")],
    scenario: ScenarioOption,
    wait: WaitOption = False,
    timeout: TimeoutOption = None,
    json: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """File a change request: ask reef's proposer for a harness change, in your own words. Exit 0 published, 1
    rejected or skipped, 2 still running."""
    with daemon_client(url, token, scenario) as client:
        runtime = client.status()["runtime"]
        caution = small_model_caution(runtime)
        if caution and not json:
            error_console().print(f"note: {caution}", soft_wrap=True, markup=False)
        filed = client.file_request(scenario, text)
        request_id = str(filed["agent_record_id"])
        if not wait:
            if json:
                print_json(filed)
            else:
                console().print(f"request {request_id} queued; its progress: {filed['progress_path']}", soft_wrap=True)
            return
        bound = wait_bound(timeout, runtime)
        again = wait_again(request_id, url)
        if not json:
            error_console().print(
                f"request {request_id} queued; watching it for at most {bound / 60:g} min (--timeout to change; "
                f"it keeps running after that: {again})",
                soft_wrap=True,
                markup=False,
            )
        progress = watch(client, request_id, bound, quiet=json)
    settle(progress, json=json, again=again)


def settle(progress: RequestProgress, *, json: bool, again: str) -> None:
    """Print where the request stands and exit: 0 published, 1 rejected or skipped, 2 still running (with `again`,
    the command that waits for it as it runs here)."""
    if json:
        print_json(progress)
    else:
        out = console()
        for line in request_outcome(progress, again):
            out.print(line, soft_wrap=True, markup=False)
    status = request_status(progress)
    if status:
        raise typer.Exit(status)


def watch(client: ReefClient, request_id: str, timeout: float, *, quiet: bool) -> RequestProgress:
    """Poll the request until it settles or the timeout passes. Each activity line (for the agent proposer each
    tool call, check and trial) is printed on stderr as it comes, and a line every so often while none comes; a
    spinner shows the phase and the latest one."""
    out = error_console()
    lines = ProgressLines()
    with out.status("queued", spinner="dots") as spinner:

        def show(progress: RequestProgress, new: list[Activity]) -> None:
            for line in lines(progress, new):
                out.print(line, soft_wrap=True, markup=False)
            latest = progress["activity"][-1]["text"] if progress["activity"] else ""
            spinner.update(Text(f"{progress['state']}: {latest}"[:160]))

        return follow_request(client, request_id, timeout, None if quiet else show)
