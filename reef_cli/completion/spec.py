"""The command tree as completion needs it: each command's path, subcommands, options and argument choices."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from typer.core import TyperArgument, TyperGroup, TyperOption

HELP = "Show this message and exit."


@dataclass(frozen=True)
class OptionSpec:
    """An option: its names, help, and what its value completes to (choices, files, or anything)."""

    names: tuple[str, ...]  # long first: ("--type", "-t")
    help: str
    takes_value: bool
    choices: tuple[str, ...] = ()
    path: bool = False


@dataclass(frozen=True)
class CommandSpec:
    """A command: its path from the program name, help, options, subcommands and argument choices."""

    path: tuple[str, ...]  # ("reef", "scenarios", "create")
    help: str
    options: tuple[OptionSpec, ...]
    subcommands: tuple[CommandSpec, ...]
    argument_choices: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The path joined with '/', as the scripts match it: reef/scenarios/create."""
        return "/".join(self.path)

    def walk(self) -> list[CommandSpec]:
        """This command and every command below it, depth first."""
        found = [self]
        for sub in self.subcommands:
            found += sub.walk()
        return found

    def value_options(self) -> list[OptionSpec]:
        """The options that take a value."""
        return [option for option in self.options if option.takes_value]


def command_spec(root: TyperGroup, prog: str, extra_options: Mapping[str, Sequence[str]] | None = None) -> CommandSpec:
    """The spec of the command tree under `root`; `extra_options` adds value-taking options by command name
    (the settings `serve` and `start` take as --section.key VALUE)."""
    return _spec(root, (prog,), extra_options or {})


def _spec(command: Any, path: tuple[str, ...], extra: Mapping[str, Sequence[str]]) -> CommandSpec:
    options: list[OptionSpec] = []
    choices: tuple[str, ...] = ()
    for param in command.params:
        if isinstance(param, TyperOption) and not param.hidden:
            options.append(_option(param))
        elif isinstance(param, TyperArgument) and not choices:
            choices = _choices(param)
    options.append(OptionSpec(("--help",), HELP, False))
    options += [
        OptionSpec((name,), "a setting of the daemon", True, path=name.endswith(("-dir", "-path")))
        for name in extra.get(path[-1], ())
    ]
    subcommands: tuple[CommandSpec, ...] = ()
    if isinstance(command, TyperGroup):
        subcommands = tuple(
            _spec(sub, (*path, name), extra) for name, sub in command.commands.items() if not sub.hidden
        )
    return CommandSpec(path, _first_sentence(command.help or ""), tuple(options), subcommands, choices)


def _option(param: TyperOption) -> OptionSpec:
    names = sorted(param.opts, key=lambda name: (not name.startswith("--"), name))
    takes_value = not param.is_flag and not param.count
    metavar = param.metavar or ""
    path = param.type_descriptor.is_path or "FILE" in metavar
    return OptionSpec(tuple(names), _first_sentence(param.help or ""), takes_value, _choices(param), path)


def _choices(param: TyperOption | TyperArgument) -> tuple[str, ...]:
    found = param.type_descriptor.choices
    if not found:
        return ()
    return tuple(str(choice.value if isinstance(choice, Enum) else choice) for choice in found)


def _first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    sentence, dot, _rest = flat.partition(". ")
    return sentence + ("." if dot else "")
