"""`reef records`: a page of records as a table or JSON lines, and `--follow` for new ones as they are stored."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from reef_cli.connect import daemon_client
from reef_cli.options import JsonOption, TokenOption, UrlOption
from reef_cli.output import console, error_console, print_json
from reef_client import RecordRow, ReefClient
from reef_client.render.derived import derived_origin
from reef_client.render.records import records_view
from reef_contract import PERSON_SOURCE, RECORD_TYPES, RecordType, awaits_score, record_type

EXAMPLE = "Example: reef records --scenario demo --unscored --limit 10 --follow"


def _record_type(name: str | None) -> RecordType | None:
    """`--type`: a record type, by its name or an old one (`train` is `request`)."""
    if name is None:
        return None
    known = record_type(name)
    if known is None:
        raise typer.BadParameter(f"{name!r} is not one of {', '.join(RECORD_TYPES)}")
    return known


TypeOption = Annotated[
    str | None,
    typer.Option(
        "--type",
        "-t",
        help=f"Only this kind of record: {', '.join(RECORD_TYPES)}.",
        callback=_record_type,
        autocompletion=lambda: list(RECORD_TYPES),
        show_default=False,
    ),
]


def _where_weight_steps_are(client: ReefClient, scenario: str | None) -> None:
    """A weight recipe takes no change requests: say where its steps are instead."""
    recipe = client.status()["recipe"]
    if recipe.get("trains") and not recipe.get("harness"):
        only = f" --scenario {scenario}" if scenario else ""
        error_console().print(
            f"the {recipe['name']} recipe trains weights from scored reports and takes no change requests: its"
            f" training steps are listed by `reef versions --scenario {scenario or '<name>'}` (and counted by"
            f" `reef status`); the reports that drove them by `reef records --type report{only}`"
        )


def records(
    scenario: Annotated[str | None, typer.Option("--scenario", "-s", help="Only this scenario.")] = None,
    kind: TypeOption = None,
    unscored: Annotated[bool, typer.Option("--unscored", help="Only inference records nobody scored yet.")] = False,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=500, help="How many recent records.")] = 20,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Then print new records as they come (Ctrl-C).")
    ] = False,
    json: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """List recent records, or follow new ones.

    A table, oldest first: receipt, time, scenario, route, model, status, latency, tokens, score. A score no person
    gave carries its source's letter: n (the user's next turn), j (a judge), o (what became of the code), i (an
    import), and a report no person gave a line under its row: the turn it was read from and why. --json prints one
    JSON object per line (`source` says where each score came from).
    """
    with daemon_client(url, token, scenario) as client:
        # Take the newest sequence before the page, so nothing stored in between is missed by --follow.
        cursor = _newest_sequence(client) if follow else None
        page = client.records(scenario=scenario, type=kind, unscored=unscored, limit=limit)
        rows = list(reversed(page["records"]))
        if not rows and not follow:
            if not json:
                error_console().print("no records match")
                if kind == "request":
                    _where_weight_steps_are(client, scenario)
            return
        _show(client, rows, json=json, header=True)
        if not follow:
            return
        # Events come once each, in sequence order; only the listed page can overlap with them.
        listed = {row["id"] for row in rows}
        if not json:
            error_console().print("[dim]following new records; Ctrl-C stops[/dim]")
        try:
            for event in client.events(after=cursor, scenario=scenario):
                if event.type not in ("record", "report") or event.record is None:
                    continue
                record = event.record
                if record["id"] not in listed and _matches(record, kind, unscored, scenario):
                    _show(client, [record], json=json, header=False)
        except KeyboardInterrupt:
            return


def _newest_sequence(client: ReefClient) -> int:
    newest = client.records(limit=1)["records"]
    return newest[0]["sequence"] if newest else 0


def _matches(row: RecordRow, kind: str | None, unscored: bool, scenario: str | None) -> bool:
    if unscored:
        return awaits_score(row, scenario)
    return kind is None or row["type"] == kind


def _show(client: ReefClient, rows: list[RecordRow], *, json: bool, header: bool) -> None:
    if json:
        for row in rows:
            print_json(row)
    elif rows or header:
        out = console()
        out.print(records_view(rows, _derived_notes(client, rows), width=out.width, header=header))
    sys.stdout.flush()


def _derived_notes(client: ReefClient, rows: list[RecordRow]) -> dict[str, str]:
    """For each report no person gave, where it came from (its evidence is in the full record, not the row)."""
    notes: dict[str, str] = {}
    for row in rows:
        if row["type"] == "report" and row["source"] not in (None, PERSON_SOURCE):
            origin = derived_origin(client.record(row["id"]))
            if origin:
                notes[row["id"]] = origin
    return notes
