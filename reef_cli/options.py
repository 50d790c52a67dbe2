"""Options every client command shares: where the daemon is, its token, and JSON output for scripts."""

from __future__ import annotations

from typing import Annotated

import typer

from reef_daemon.contract import DEFAULT_URL, TOKEN_ENV, URL_ENV

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help=f"Daemon URL. Else {URL_ENV}, else the daemon `reef start` ran here, else {DEFAULT_URL}.",
        show_default=False,
    ),
]
TokenOption = Annotated[
    str | None, typer.Option("--token", help=f"The daemon's token. Else {TOKEN_ENV}.", show_default=False)
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of tables.")]
