"""`reef show RECEIPT`: one exchange made readable, or the full record as JSON."""

from __future__ import annotations

from typing import Annotated

import typer

from reef_cli.connect import daemon_client
from reef_cli.options import JsonOption, TokenOption, UrlOption
from reef_cli.output import console, print_json
from reef_client.render.record import record_view

EXAMPLE = "Example: reef show 3f2a9c0d4e5b6a7980c1d2e3f4a5b6c7 --json"


def show(
    receipt: Annotated[
        str,
        typer.Argument(
            help="The record's id (x-reef-agent-record-id), or a unique start of it (8 or more characters, as lists"
            " show it).",
            show_default=False,
        ),
    ],
    json: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Show one record, made readable.

    Messages as markdown, tool calls and results, the streamed answer assembled, timings, tokens, the serving
    version, and the reports that reference it.
    """
    with daemon_client(url, token) as client:
        record = client.record(receipt.strip())
    if json:
        print_json(record)
        return
    console().print(record_view(record))
