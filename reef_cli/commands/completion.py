"""`reef completion bash|zsh|fish`: print the completion script generated from this command tree."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer
from typer.core import TyperGroup

from reef_cli.completion import completion_script
from reef_cli.completion.spec import command_spec

EXAMPLE = "Example: reef completion bash > ~/.local/share/bash-completion/completions/reef"


class Shell(StrEnum):
    """The shells a completion script is generated for."""

    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def completion(
    ctx: typer.Context,
    shell: Annotated[Shell, typer.Argument(help="The shell to complete in.", show_default=False)],
) -> None:
    """Print a completion script for bash, zsh or fish.

    The README says how to install each.
    """
    root = ctx.find_root().command
    assert isinstance(root, TyperGroup)
    spec = command_spec(root, "reef")
    typer.echo(completion_script(shell.value, spec), nl=False)
