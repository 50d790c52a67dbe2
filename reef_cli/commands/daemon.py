"""`reef start`, `reef stop`, `reef status`: the background daemon of this directory, and what it is doing."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import typer

from reef_cli.connect import found_daemons, reported_failures
from reef_cli.daemon_process import StartFailed, is_reef_daemon, start_daemon, stop_daemon
from reef_cli.discovery import Target
from reef_cli.options import JsonOption, TokenOption, UrlOption
from reef_cli.output import console, error_console, fail, print_json
from reef_cli.render.status import status_view
from reef_cli.serve import settings_from_command_line
from reef_cli.setting_options import as_arguments, with_setting_options
from reef_cli.state import DaemonFiles, running_here
from reef_client import ReefClient, ReefClientError
from reef_contract import DEFAULT_STATE_DIR, SpendAnswer, Status
from reef_daemon.scenario_recipes import other_recipe_notice
from reef_daemon.setting_kinds import SettingsError
from reef_daemon.settings import Settings

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
        from reef_daemon.recipe_host import resolve_recipe  # here: client commands load no recipe

        resolve_recipe(settings.recipe)
    except SettingsError as exc:
        fail(str(exc), 2)
    files = DaemonFiles(settings.reef.state_dir)
    beside = _beside_other_recipe(files, settings)
    if beside:
        overrides = {**overrides, **beside}
        settings, _reload = settings_from_command_line(overrides, config)
        typer.echo(
            f"note: a daemon of another recipe runs from {files.state_dir} at {files.url()}; this one keeps its"
            f" state in {settings.reef.state_dir}"
        )
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


def _beside_other_recipe(files: DaemonFiles, settings: Settings) -> dict[str, str]:
    """The settings that start this recipe's daemon beside another recipe's running from the same state directory
    (its own `<state>/<recipe>`, and a free port unless one was chosen); none when no other recipe runs there or
    the state directory was chosen."""
    url = files.url()
    if files.running_pid() is None or url is None or settings.sources.get("reef.state-dir", "default") != "default":
        return {}
    try:
        with ReefClient(url, settings.reef.token) as client:
            running_recipe = client.status()["recipe"]["name"]
    except ReefClientError:
        return {}
    from reef_daemon.recipe_host import resolve_recipe

    recipe = resolve_recipe(settings.recipe).name
    if running_recipe == recipe:
        return {}
    beside = {"reef.state-dir": str(settings.reef.state_dir / recipe)}
    if settings.sources.get("reef.port", "default") == "default":
        beside["reef.port"] = "0"
    return beside


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
    """Stop the daemons running from this directory (state in .reef, or a recipe's .reef/<recipe>), each named.

    Requests in flight and pending writes finish first.
    """
    here = running_here() or [DaemonFiles(DEFAULT_STATE_DIR)]
    chosen = [DaemonFiles(state_dir)] if state_dir is not None else here
    stuck = [files for files in chosen if not _stop_one(files, named=len(chosen) > 1)]
    if stuck:
        logs = ", ".join(str(files.log_file) for files in stuck)
        fail(f"{len(stuck)} of {len(chosen)} daemons did not stop in time and were killed; see {logs}")


def _stop_one(files: DaemonFiles, *, named: bool) -> bool:
    """Stop the daemon of `files`, saying so; False when it had to be killed."""
    pid = files.running_pid()
    if pid is None or not is_reef_daemon(pid):
        files.clear()
        typer.echo(f"reef is not running (nothing started from {files.state_dir})")
        return True
    which = f"pid {pid}, state in {files.state_dir}" if named else f"pid {pid}"
    with error_console().status(f"stopping reef ({which})"):
        clean = stop_daemon(pid)
    files.clear()
    if clean:
        typer.echo(f"reef stopped ({which})")
    return clean


def status(url: UrlOption = None, token: TokenOption = None, json: JsonOption = False) -> None:
    """Show what the daemon is doing (each daemon's, when several run from this directory).

    Recipe, runtime, model, uptime, scenarios with record and report counts, training state.
    """
    targets = found_daemons(url, token)
    bodies: list[tuple[Target, Status]] = []
    costs: list[SpendAnswer] = []
    for target in targets:
        with ReefClient(target.url, target.token) as client, reported_failures(target):
            bodies.append((target, client.status()))
            costs.append(client.spend() if not json else {"scenarios": {}, "judge": {}})
    if json:
        if len(bodies) == 1:
            print_json(bodies[0][1])
        else:
            print_json({"daemons": [{"url": target.url, "status": body} for target, body in bodies]})
        return
    for (target, body), cost in zip(bodies, costs, strict=True):
        if len(bodies) > 1:
            console().print(f"[bold]{target.url}[/bold] (state in {target.source})")
        console().print(status_view(body, target.url, cost))
