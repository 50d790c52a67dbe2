"""How every `reef` command's help reads: paragraphs flow to the terminal's width (a docstring's line breaks are
the source's, not the reader's), a plain flag shows no `<bool>`, and an argument is named in capitals in the usage
line (`PATHS...`, `[ID]`) rather than typer's `{paths}`. Applied once, to the whole command tree, as it is built."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from typer.core import TyperArgument, TyperGroup, TyperOption

NO_REWRAP = "\b"  # click's marker for a paragraph kept as written


class ReefGroup(TyperGroup):
    """A typer group whose commands, its subgroups' included, get reef's help (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        tidy(self)


def tidy(command: Any) -> None:
    """Tidy the help of `command` and of every command below it."""
    command.help = flowed(command.help)
    for param in command.params:
        if isinstance(param, TyperOption) and param.is_flag and not param.count:
            param.metavar = ""  # typer would show <bool>; a flag takes no value
        elif isinstance(param, TyperArgument):
            if param.metavar is None and param.name:
                param.metavar = param.name.upper() + ("..." if param.nargs != 1 else "")
            setattr(param, "_usage_display_name", functools.partial(_usage_name, param))  # noqa: B010
    setattr(command, "get_help_option", functools.partial(_help_option, command.get_help_option))  # noqa: B010
    if isinstance(command, TyperGroup):
        for sub in command.commands.values():
            tidy(sub)


def flowed(text: str | None) -> str | None:
    """The text with each paragraph's line breaks made spaces, so the help fills the terminal's width."""
    if text is None:
        return None
    paragraphs = [part.strip() for part in text.strip().split("\n\n")]
    return "\n\n".join(part if part.startswith(NO_REWRAP) else " ".join(part.split()) for part in paragraphs)


def _usage_name(param: TyperArgument) -> str:
    """The argument in the usage line: `NAME` when required, `[NAME]` when not."""
    name = param.metavar or "ARG"
    return name if param.required else f"[{name}]"


def _help_option(made: Callable[[Any], TyperOption | None], ctx: Any) -> TyperOption | None:
    option = made(ctx)
    if option is not None:
        option.metavar = ""  # --help is a flag too
    return option
