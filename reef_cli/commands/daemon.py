"""`reef start`, `reef stop`, `reef status`: the background daemon of this directory, and what it is doing."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import typer

from reef_cli.connect import daemon_client
from reef_cli.daemon_process import StartFailed, is_reef_daemon, start_daemon, stop_daemon
from reef_cli.options import JsonOption, TokenOption, UrlOption
from reef_cli.output import console, error_console, fail, print_json
from reef_cli.render.status import status_view
from reef_cli.serve import settings_from_command_line
from reef_cli.setting_options import as_arguments, with_setting_options
from reef_cli.state import DaemonFiles, running_here
from reef_client import ReefClient, ReefClientError
from reef_daemon.contract import DEFAULT_STATE_DIR
from reef_daemon.recipe_host import resolve_recipe
from reef_daemon.scenario_recipes import other_recipe_notice
from reef_daemon.settings import SettingsError

START_EXAMPLE = "Example: reef start --inference.upstream-url http://127.0.0.1:11434 --inference.upstream-model llama3"
STOP_EXAMPLE = "Example: reef stop"
STATUS_EXAMPLE = "Example: reef status --json"

StateDirOption = Annotated[
    Path | None,
    typer.Option(
        "--state-dir", help="State directory the daemon was started with. Default: the one daemon running from here."
    ),
]


@with_setting_options
def start(
    config: Path | None = typer.Option(None, "-c", "--config", help="Settings file, TOML or YAML."),
    *,
    overrides: Mapping[str, str],
) -> None:
    """Run the daemon in the background, with the options of `reef serve`.

    Writes its pid, port and log under the state directory (.reef), waits until /healthz answers, prints the URL.
    """
    try:
        settings, _reload = settings_from_command_line(overrides, config)
        resolve_recipe(settings.recipe)
    except SettingsError as exc:
        fail(str(exc), 2)
    files = DaemonFiles(settings.reef.state_dir)
    running = files.running_pid()
    if running is not None:
        typer.echo(f"reef is already running at {files.url() or '(starting)'} (pid {running}); `reef stop` stops it")
        return
    serve_args = ([] if config is None else ["--config", str(config)]) + as_arguments(overrides)
    with error_console().status("starting reef; waiting for /healthz"):
        try:
            started = start_daemon(files, serve_args, settings.reef.host, settings.reef.port)
        except StartFailed as exc:
            fail(f"did not start: {exc}")  # said as "reef: did not start: ..."
    typer.echo(f"reef started at {started.url} (pid {started.pid}); log: {files.log_file}")
    for line in _other_recipe_lines(started.url, settings.reef.token):
        typer.echo(f"note: {line}")


def _other_recipe_lines(url: str, token: str | None) -> list[str]:
    """What the started daemon says about scenarios made under another recipe (nothing if it cannot be asked)."""
    try:
        with ReefClient(url, token) as client:
            status = client.status()
    except ReefClientError:
        return []
    recipes = {name: counts["recipe"] for name, counts in status["scenarios"].items()}
    return other_recipe_notice(status["recipe"]["name"], recipes)


def stop(state_dir: StateDirOption = None) -> None:
    """Stop the daemon running from this directory (state in .reef, or a recipe's .reef/<recipe>).

    Requests in flight and pending writes finish first.
    """
    files = DaemonFiles(state_dir) if state_dir is not None else _the_one_running_here()
    pid = files.running_pid()
    if pid is None or not is_reef_daemon(pid):
        files.clear()
        typer.echo(f"reef is not running (nothing started from {files.state_dir})")
        return
    with error_console().status(f"stopping reef (pid {pid})"):
        clean = stop_daemon(pid)
    files.clear()
    if not clean:
        fail(f"reef (pid {pid}) did not stop in time and was killed; see {files.log_file}")
    typer.echo(f"reef stopped (pid {pid})")


def status(url: UrlOption = None, token: TokenOption = None, json: JsonOption = False) -> None:
    """Show what the daemon is doing.

    Recipe, runtime, model, uptime, scenarios with record and report counts, training state.
    """
    with daemon_client(url, token) as client:
        body = client.status()
        if json:
            print_json(body)
            return
        console().print(status_view(body, client.url))


def _the_one_running_here() -> DaemonFiles:
    running = running_here()
    if len(running) > 1:
        listed = ", ".join(str(files.state_dir) for files in running)
        fail(f"several daemons run from this directory ({listed}); choose one with --state-dir", 2)
    return running[0] if running else DaemonFiles(DEFAULT_STATE_DIR)
