"""`reef request`: file a change request for a scenario's harness; with --wait, watch it to the end and say how to
use the result. `reef evolve`, its first name, still works."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.text import Text

from reef_cli.client import ReefClient, RequestProgress
from reef_cli.connect import daemon_client
from reef_cli.options import JsonOption, TokenOption, UrlOption
from reef_cli.output import console, error_console, print_json

EXAMPLE = 'Example: reef request "add a /changelog command that drafts release notes" --scenario my-harness --wait'
POLL_S = 1.0
PUBLISHED = ("selected", "pending")
EXIT_TIMED_OUT = 2

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
    with daemon_client(url, token) as client:
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
        _report(progress)
    if progress["state"] != "settled":
        raise typer.Exit(EXIT_TIMED_OUT)
    if progress.get("result") not in PUBLISHED:
        raise typer.Exit(1)


def watch(client: ReefClient, request_id: str, timeout: float, *, quiet: bool) -> RequestProgress:
    """Poll the request until it settles or the timeout passes. Each activity line (for the agent proposer each
    tool call, check and trial) is printed on stderr as it comes; a spinner shows the phase and the latest one."""
    deadline = time.monotonic() + timeout
    shown = 0
    out = error_console()
    with out.status("queued", spinner="dots") as spinner:
        while True:
            progress = client.request_progress(request_id)
            if not quiet:
                activity = progress["activity"]
                for entry in activity[shown:]:
                    out.print(f"· {entry['text']}", soft_wrap=True, markup=False)
                shown = len(activity)
                latest = activity[-1]["text"] if activity else ""
                spinner.update(Text(f"{progress['state']}: {latest}"[:160]))
            if progress["state"] == "settled" or time.monotonic() >= deadline:
                return progress
            time.sleep(POLL_S)


def _report(progress: RequestProgress) -> None:
    lines = []
    if progress["state"] != "settled":
        lines.append(
            f"request {progress['id']} is still {progress['state']}; wait for it with: reef requests {progress['id']}"
            " --wait (filing it again would make a second request)"
        )
    else:
        result = progress["result"]
        release_id = progress.get("release")
        release = f" (release {release_id[:8]})" if release_id else ""
        version = progress.get("version")
        lines.append(f"{result}: {version}{release}" if version else f"{result}{release}")
        if result == "pending":
            lines.append(
                f"it changes an extension, so it serves only after: reef promote --scenario {progress['scenario']} "
                f"{progress['version']}"
            )
        if progress.get("reason"):
            lines.append(f"why: {progress['reason']}")
        if progress.get("how_to_use") and result in PUBLISHED:
            lines.append(f"How to use: {progress['how_to_use']}")
    out = console()
    for line in lines:
        out.print(line, soft_wrap=True)
