"""Options client commands share: where the daemon is, its token, JSON output for scripts, and waiting on a change
request."""

from __future__ import annotations

from typing import Annotated

import typer

from reef_contract import DEFAULT_URL, TOKEN_ENV, URL_ENV

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
WaitOption = Annotated[bool, typer.Option("--wait", help="Watch the request until it settles.")]
TimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        help="Seconds --wait waits before giving up (exit 2): 1800, or 600 on the small embedded model.",
        show_default=False,
    ),
]
