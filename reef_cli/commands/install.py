"""`reef install`: install a scenario's harness for an agent on this machine, with the daemon's install script."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from reef_cli.commands.versions import resolve_version
from reef_cli.connect import daemon_client, found_daemon
from reef_cli.options import TokenOption, UrlOption
from reef_cli.setting_options import adapter_names
from reef_client import run_install_script

EXAMPLE = "Example: reef install --adapter pi --scenario my-harness    (then run: reef-pi)"


def install(
    adapter: Annotated[
        str,
        typer.Option(
            "--adapter",
            "-a",
            help="The agent: pi, codex, dsh, claude or opencode.",
            show_default=False,
            autocompletion=adapter_names,
        ),
    ],
    scenario: Annotated[
        str, typer.Option("--scenario", "-s", help="The scenario whose harness to install.", show_default=False)
    ],
    root: Annotated[
        Path | None,
        typer.Option("--root", help="Install here instead of ~/reef-harness/<scenario>/<adapter>.", show_default=False),
    ] = None,
    release: Annotated[
        str | None, typer.Option("--release", help="A version (v3) or release id instead of the served one.")
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Write the harness, its model binding and the reef-<adapter> wrapper; the same as piping the install script
    (GET /reef/harness/install) to sh. Exit 1 when the install refuses, with the reason."""
    with daemon_client(url, token) as client:
        release_id = resolve_version(client.releases(scenario), release)["release_id"] if release else None
        script = client.install_script(scenario, adapter, release_id)
    done = run_install_script(script, found_daemon(url, token).token, root, root_how="with --root")
    raise typer.Exit(done.returncode)
