"""`reef serve`: assemble settings from the command line, a file and the environment, then run the daemon."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from reef_cli.setting_options import SettingsCommand, with_setting_options
from reef_cli.state import DaemonFiles
from reef_daemon.setting_kinds import SettingsError
from reef_daemon.settings import Settings

EXAMPLE = "Example: reef serve --inference.upstream-url http://127.0.0.1:11434 --inference.upstream-model llama3"


class ServeCommand(SettingsCommand):
    """`reef serve`, whose errors name it."""

    error_prefix = "reef serve"


@with_setting_options
def serve_command(
    config: Path | None = typer.Option(None, "-c", "--config", help="Settings file, TOML or YAML."),
    print_config: bool = typer.Option(False, "--print-config", help="Print every setting and where it came from."),
    *,
    overrides: Mapping[str, str],
) -> None:
    """Run the daemon in the foreground. Any setting can be given as --section.key VALUE (--reef.port 8900)."""
    try:
        settings, reload = settings_from_command_line(overrides, config)
        if print_config:
            print_settings(settings)
            return
        from reef_daemon.recipe_host import resolve_recipe  # here: `reef --help` and client commands load no recipe

        resolve_recipe(settings.recipe)
    except SettingsError as exc:
        typer.echo(f"{ServeCommand.error_prefix}: {exc}", err=True)
        raise typer.Exit(2) from None

    from reef_daemon.serve import run

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    files = DaemonFiles(settings.reef.state_dir)
    running = files.running_pid()
    if running is not None and running != os.getpid():
        typer.echo(
            f"{ServeCommand.error_prefix}: reef is already running from {settings.reef.state_dir} at "
            f"{files.url() or '(starting)'} (pid {running}); `reef stop` stops it",
            err=True,
        )
        raise typer.Exit(1)
    try:
        run(settings, reload, lambda url: _announce_here(files, url))
    except SettingsError as exc:
        typer.echo(f"{ServeCommand.error_prefix}: {exc}", err=True)
        raise typer.Exit(2) from None
    finally:
        if files.pid() == os.getpid():
            files.clear()


def _announce_here(files: DaemonFiles, url: str) -> None:
    """Write this daemon's pid and URL in its state directory, so client commands run here find it; unless another
    running daemon already keeps its files there."""
    if files.running_pid() not in (None, os.getpid()):
        return
    files.write_pid(os.getpid())
    files.write_address(url)


def settings_from_command_line(
    overrides: Mapping[str, str], config: Path | None
) -> tuple[Settings, Callable[[], Settings]]:
    """Settings from the command line's, the file, the environment and the recipe's profile; plus a reloader that
    reads the file again (the command line and the environment stay as they were at start)."""
    environ = dict(os.environ)

    from reef_daemon.recipe_host import load_serving_settings

    def reload() -> Settings:
        return load_serving_settings(config_file=config, overrides=overrides, environ=environ)

    return reload(), reload


def print_settings(settings: Settings) -> None:
    """Every setting, the value in use (a recipe may choose one, such as reefine's answer cap with the embedded
    model) and where it came from."""
    from reef_daemon.recipe_host import resolve_recipe

    chosen = resolve_recipe(settings.recipe).chosen_settings(settings)
    table = Table(title="reef settings", show_lines=False)
    table.add_column("setting")
    table.add_column("value")
    table.add_column("from")
    for key, shown, source in settings.describe():
        table.add_row(key, *chosen.get(key, (shown, source)))
    Console(width=120).print(table)
