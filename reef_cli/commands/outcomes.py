"""`reef outcomes`: scores from what became of the code a session wrote. The `reef-<agent>` wrappers note each
session's git changes when it ends; `scan` reads those notes against their repositories (committed and kept: high;
reverted: low), and a CI step's `report --commit SHA --ci pass|fail` scores the sessions whose changes that commit
holds. Each becomes an `outcome` report on the session's records, once per record. Nothing leaves the machine but
the scores, the commit and the reason: the notes keep hashes of the added lines, never the code."""

from __future__ import annotations

from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from reef_cli.connect import daemon_client
from reef_cli.options import JsonOption, TokenOption, UrlOption
from reef_cli.output import console, fail, print_json
from reef_client import MAX_FILE_BYTES, MAX_READ_BYTES, Scanned, report_ci, scan

SCAN_EXAMPLE = "Example: reef outcomes scan --days 7 --verbose"
REPORT_EXAMPLE = "Example: reef outcomes report --commit $GITHUB_SHA --ci pass"
KEPT_DAYS = 7.0

app = typer.Typer(
    name="outcomes",
    help="Score sessions by what became of their code: committed and kept, reverted, CI passing on it. A note "
    f"reads only regular files of at most {MAX_FILE_BYTES // 1024 // 1024} MiB (never links or devices), "
    f"{MAX_READ_BYTES // 1024 // 1024} MiB in all per session.",
    epilog=SCAN_EXAMPLE,
    no_args_is_help=True,
)

NotesOption = Annotated[
    Path | None,
    typer.Option("--notes", help="The folder of session notes. Else $REEF_OUTCOMES_DIR or ~/.reef/outcomes.",
                 file_okay=False, show_default=False),
]  # fmt: skip


class CiResult(StrEnum):
    passed = "pass"
    failed = "fail"


@app.command("scan", epilog=SCAN_EXAMPLE)
def scan_command(
    days: Annotated[
        float, typer.Option("--days", min=0, help="How long committed changes must stay in HEAD to count as kept.")
    ] = KEPT_DAYS,
    notes: NotesOption = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Say why each session got no report.")] = False,
    json: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Read each session's changes against its repository and report the ones decided: kept or reverted."""
    with daemon_client(url, token) as client:
        scanned = scan(client, days=days, folder=notes)
    _show(scanned, verbose, json)


@app.command("report", epilog=REPORT_EXAMPLE)
def report_command(
    commit: Annotated[str, typer.Option("--commit", help="The commit CI ran on (a SHA or any git name).")],
    ci: Annotated[CiResult, typer.Option("--ci", help="Whether CI passed on it.", case_sensitive=False)],
    repo: Annotated[Path, typer.Option("--repo", help="The repository the commit is in.", file_okay=False)] = Path(),
    notes: NotesOption = None,
    json: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Score the sessions whose changes a commit holds: high when CI passed on it, low when it failed."""
    with daemon_client(url, token) as client:
        try:
            scanned = report_ci(client, repo, commit, ci is CiResult.passed, folder=notes)
        except ValueError as exc:
            fail(str(exc))
    _show(scanned, True, json)
    if not scanned and not json:
        console().print(f"no noted session's changes are in {commit}")


def _show(scanned: list[Scanned], verbose: bool, json: bool) -> None:
    if json:
        print_json([{"session": s.session, "reports": s.reports, **asdict(s.decision)} for s in scanned])
        return
    out = console()
    for item in scanned:
        decision = item.decision
        if decision.place is not None:
            out.print(f"{item.session}: {decision.reason}; {item.reports} new outcome report(s)")
        elif verbose:
            out.print(f"{item.session}: no report: {decision.reason}", style="dim")
    made = sum(item.reports for item in scanned)
    if not verbose and not made:
        out.print(f"{len(scanned)} session(s) read, no new outcome report (--verbose says why)")
