"""Choosing the generator for a shell."""

from __future__ import annotations

from collections.abc import Callable

from reef_cli.completion.bash import bash_script
from reef_cli.completion.fish import fish_script
from reef_cli.completion.spec import CommandSpec
from reef_cli.completion.zsh import zsh_script

SHELLS: dict[str, Callable[[CommandSpec], str]] = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}


def completion_script(shell: str, root: CommandSpec) -> str:
    """The completion script for `shell` (bash, zsh or fish) of the command tree `root`."""
    return SHELLS[shell](root)
