"""`reef versions`, `reef promote`, `reef rollback`: a scenario's harness versions, and changing which one serves."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import typer
from rich.table import Table

from reef_cli.client import ReleaseRow
from reef_cli.commands.evolve import ScenarioOption
from reef_cli.connect import daemon_client
from reef_cli.installs import mark_installed
from reef_cli.options import JsonOption, TokenOption, UrlOption
from reef_cli.output import console, fail, print_json
from reef_cli.render.versions import HEADERS, request_text, version_cells

VERSIONS_EXAMPLE = "Example: reef versions --scenario my-harness"
PROMOTE_EXAMPLE = "Example: reef promote --scenario my-harness v4"
ROLLBACK_EXAMPLE = "Example: reef rollback --scenario my-harness v2"

VersionArgument = Annotated[str, typer.Argument(help="A version (v3) or a release id (or its first 8+ characters).")]


def versions(
    scenario: ScenarioOption, json: JsonOption = False, url: UrlOption = None, token: TokenOption = None
) -> None:
    """List a scenario's harness versions, oldest first: release, operation, result, status, request.

    Every step is numbered (vN), also one that published no release (rejected or skipped).
    """
    with daemon_client(url, token) as client:
        rows = mark_installed(scenario, client.releases(scenario))
    if json:
        print_json({"scenario": scenario, "releases": rows})
        return
    table = Table(title=f"harness versions of {scenario}")
    for column in HEADERS:
        table.add_column(column, no_wrap=True)
    table.add_column("request")  # the one column that wraps on a narrow terminal
    for row in reversed(rows):
        table.add_row(*version_cells(row, installed=row["installed"]), request_text(row))
    console().print(table)


def promote(
    scenario: ScenarioOption, version: VersionArgument, url: UrlOption = None, token: TokenOption = None
) -> None:
    """Serve a pending version (one that changes an extension): republished as a new version."""
    _change(scenario, version, "promote", url, token)


def rollback(
    scenario: ScenarioOption, version: VersionArgument, url: UrlOption = None, token: TokenOption = None
) -> None:
    """Serve an earlier version again: republished as a new version (history is never rewritten)."""
    _change(scenario, version, "rollback", url, token)


def _change(scenario: str, version: str, operation: str, url: str | None, token: str | None) -> None:
    with daemon_client(url, token) as client:
        target = resolve_version(client.releases(scenario), version)
        if target["release_id"] is None:
            fail(f"{target['version']} published no release; choose a version that did")
        step = client.change_release(scenario, operation, target["release_id"])
    verb = "promoted" if operation == "promote" else "rolled back to"
    release = (step["release_id"] or "")[:8]
    console().print(f"{verb} {target['version']}: now serving {step['version']} (release {release})")


def resolve_version(rows: Sequence[ReleaseRow], wanted: str) -> ReleaseRow:
    """The row a version (`v3`) or a release id prefix names; exits with a message when none or several do."""
    wanted = wanted.strip()
    by_version = [row for row in rows if row["version"] == wanted]
    if by_version:
        return by_version[0]
    if len(wanted) >= 8:
        matches = [row for row in rows if row["release_id"] and row["release_id"].startswith(wanted)]
        if len(matches) == 1:
            return matches[0]
    known = ", ".join(row["version"] for row in reversed(rows) if row["version"])
    fail(f"no version '{wanted}' (known: {known}); name one as vN or by its release id")
