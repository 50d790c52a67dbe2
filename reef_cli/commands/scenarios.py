"""`reef scenarios`: list the scenarios, create one, move one to the daemon's recipe, or archive one (its records
are kept)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

import typer

from reef_cli.connect import daemon_client
from reef_cli.options import JsonOption, TokenOption, UrlOption
from reef_cli.output import console, error_console, print_answer, print_json
from reef_cli.render.status import scenarios_table

LIST_EXAMPLE = "Example: reef scenarios --json"
CREATE_EXAMPLE = "Example: reef scenarios create my-harness --training-mode manual"
ARCHIVE_EXAMPLE = "Example: reef scenarios archive my-harness"
MOVE_EXAMPLE = "Example: reef scenarios move demo"

app = typer.Typer(
    name="scenarios",
    help="List the scenarios with their record and report counts; create, move or archive one.",
    epilog=LIST_EXAMPLE,
    invoke_without_command=True,
    no_args_is_help=False,
)

NameArgument = Annotated[str, typer.Argument(help="Scenario name: letters, digits, '.', '_', '-'.", show_default=False)]


class TrainingMode(StrEnum):
    """When a scenario's recipe trains: on every eligible report, on request, or both."""

    auto = "auto"
    manual = "manual"
    hybrid = "hybrid"


@dataclass(frozen=True)
class GroupOptions:
    """The daemon options given before the subcommand."""

    url: str | None
    token: str | None


def _inherited(ctx: typer.Context, url: str | None, token: str | None) -> tuple[str | None, str | None]:
    parent = ctx.obj if isinstance(ctx.obj, GroupOptions) else GroupOptions(None, None)
    return url or parent.url, token or parent.token


@app.callback()
def list_scenarios(
    ctx: typer.Context, json: JsonOption = False, url: UrlOption = None, token: TokenOption = None
) -> None:
    """List the scenarios with their record and report counts; create, move or archive one."""
    if ctx.invoked_subcommand is not None:
        # `reef scenarios --url U create NAME` means the same as `reef scenarios create NAME --url U`.
        ctx.obj = GroupOptions(url, token)
        return
    with daemon_client(url, token) as client:
        rows = client.scenarios()
    if json:
        print_json({"scenarios": rows})
    elif rows:
        console().print(scenarios_table(rows))
    else:
        error_console().print(
            "no scenarios yet: send a request with the x-reef-scenario header, or `reef scenarios create`"
        )


@app.command("create", epilog=CREATE_EXAMPLE)
def create(
    ctx: typer.Context,
    name: NameArgument,
    training_mode: Annotated[
        TrainingMode | None,
        typer.Option("--training-mode", help="When the recipe trains (default: the recipe's)."),
    ] = None,
    json: JsonOption = False,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Create a scenario with the daemon's recipe.

    A scenario is also created by the first request that names it.
    """
    with daemon_client(*_inherited(ctx, url, token)) as client:
        row, created = client.create_scenario(name, None if training_mode is None else training_mode.value)
    verb = "created" if created else "already exists:"
    line = f"{verb} scenario {row['scenario']} (recipe {row['recipe']}, training {row['training_mode']})"
    print_answer({**row, "created": created}, json, line)


@app.command("move", epilog=MOVE_EXAMPLE)
def move(
    ctx: typer.Context, name: NameArgument, json: JsonOption = False, url: UrlOption = None, token: TokenOption = None
) -> None:
    """Move a scenario made under another recipe to the recipe the daemon runs.

    A scenario keeps the recipe it was made under; after a move, the daemon's recipe trains it, reading its
    records from the start, with the recipe's default training mode.
    """
    with daemon_client(*_inherited(ctx, url, token), name) as client:
        recipe = str(client.status()["recipe"]["name"])
        before = next((row for row in client.scenarios() if row["scenario"] == name), None)
        row = client.move_scenario(name, recipe)
    if json:
        print_json(dict(row))
        return
    if before is not None and before["recipe"] == recipe:
        typer.echo(f"scenario {name} already has recipe {recipe}")
        return
    previous = f" from {before['recipe']}" if before is not None else ""
    typer.echo(f"moved scenario {name}{previous} to recipe {recipe} (training {row['training_mode']})")


@app.command("archive", epilog=ARCHIVE_EXAMPLE)
def archive(
    ctx: typer.Context, name: NameArgument, json: JsonOption = False, url: UrlOption = None, token: TokenOption = None
) -> None:
    """Archive a scenario.

    Its records stay, under a new name, and the name is free again.
    """
    with daemon_client(*_inherited(ctx, url, token), name) as client:
        archived_as = client.archive_scenario(name)
    line = f"archived scenario {name}; its records are kept as {archived_as}"
    print_answer({"scenario": name, "archived_as": archived_as}, json, line)
