"""The `reef` command: daemon control, records, scoring. Every client command goes through `client.py`."""

from __future__ import annotations

import typer

from reef_cli.serve import EXAMPLE as SERVE_EXAMPLE
from reef_cli.serve import serve_command
from reef_daemon import __version__

app = typer.Typer(
    name="reef",
    help="Record what a coding agent does, score it, and improve the model or the harness.",
    no_args_is_help=True,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"reef {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Record what a coding agent does, score it, and improve the model or the harness."""


app.command(
    "serve",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    epilog=SERVE_EXAMPLE,
)(serve_command)


def main() -> None:
    app()
