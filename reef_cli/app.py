"""The `reef` command: daemon control, records, scoring. Every client command goes through `client.py`."""

from __future__ import annotations

import sys

import typer

import reef_cli.commands.records_io as records_io
from reef_cli.commands import (
    completion,
    daemon,
    demo,
    install,
    outcomes,
    records,
    request,
    requests,
    scenarios,
    score,
    show,
    sources,
    store,
    tasks,
    tui,
    versions,
)
from reef_cli.help_text import ReefGroup
from reef_cli.serve import EXAMPLE as SERVE_EXAMPLE
from reef_cli.serve import ServeCommand, serve_command
from reef_cli.setting_options import SETTINGS_CONTEXT, SettingsCommand
from reef_daemon import __version__

app = typer.Typer(
    name="reef",
    help="Record what a coding agent does, score it, and improve the model or the harness.",
    epilog="Example: reef start --inference.upstream-url http://127.0.0.1:11434 && reef records --follow",
    no_args_is_help=True,
    add_completion=False,
    cls=ReefGroup,
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


app.command("serve", cls=ServeCommand, context_settings=SETTINGS_CONTEXT, epilog=SERVE_EXAMPLE)(serve_command)
app.command("start", cls=SettingsCommand, context_settings=SETTINGS_CONTEXT, epilog=daemon.START_EXAMPLE)(daemon.start)
app.command("stop", epilog=daemon.STOP_EXAMPLE)(daemon.stop)
app.command("status", epilog=daemon.STATUS_EXAMPLE)(daemon.status)
app.add_typer(scenarios.app)
app.command("records", epilog=records.EXAMPLE)(records.records)
app.command("show", epilog=show.EXAMPLE)(show.show)
app.command("import", epilog=records_io.IMPORT_EXAMPLE)(records_io.import_)
app.command("export", epilog=records_io.EXPORT_EXAMPLE)(records_io.export)
app.command("score", context_settings={"ignore_unknown_options": True}, epilog=score.EXAMPLE)(score.score)
app.command("request", epilog=request.EXAMPLE)(request.request)
# Its first name, kept for the scripts and installed harness commands that type it.
app.command("evolve", hidden=True, epilog=request.EXAMPLE)(request.request)
app.command("requests", epilog=requests.EXAMPLE)(requests.requests)
app.command("versions", epilog=versions.VERSIONS_EXAMPLE)(versions.versions)
app.command("promote", epilog=versions.PROMOTE_EXAMPLE)(versions.promote)
app.command("rollback", epilog=versions.ROLLBACK_EXAMPLE)(versions.rollback)
app.add_typer(tasks.app)
app.add_typer(store.app)
app.add_typer(outcomes.app)
app.add_typer(sources.app)
app.command("install", epilog=install.EXAMPLE)(install.install)
app.command("tui", epilog=tui.EXAMPLE)(tui.tui)
app.add_typer(demo.app)
app.command("completion", epilog=completion.EXAMPLE)(completion.completion)


def main() -> None:
    # A bare `reef` on a terminal opens the app when a daemon answers. Decided before typer parses: with
    # no_args_is_help, help is printed before any callback runs; --help, --version and completion never get here.
    if len(sys.argv) == 1 and tui.bare_reef_opens_tui():
        tui.open_tui()
        return
    app()
