"""Options every client command shares: where the daemon is, its token, and JSON output for scripts."""

from __future__ import annotations

from typing import Annotated

import typer

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="Daemon URL. Else REEF_URL, else the daemon `reef start` ran here, else http://127.0.0.1:8900.",
        show_default=False,
    ),
]
TokenOption = Annotated[
    str | None, typer.Option("--token", help="The daemon's token. Else REEF_TOKEN.", show_default=False)
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of tables.")]
