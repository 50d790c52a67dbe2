"""The command tree as completion needs it: each command's path, subcommands, options and argument choices."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import typer
from typer.core import TyperArgument, TyperGroup, TyperOption

from reef_contract import DEFAULT_STATE_DIR, DEFAULT_URL, SCENARIOS_ROUTE

HELP = "Show this message and exit."
# How a script asks the daemon for its scenarios when --scenario is completed (no Python starts): its address from
# REEF_URL, else the one `reef start` wrote here, else the default; REEF_TOKEN if set; names read from the JSON.
SCENARIOS_URL_FILE = f"{DEFAULT_STATE_DIR}/daemon.url"
SCENARIOS_ROUTE_PATH = SCENARIOS_ROUTE
DEFAULT_DAEMON_URL = DEFAULT_URL


def shell_scenarios_function(prog: str, locals_: list[str]) -> list[str]:
    """The bash/zsh function that prints the running daemon's scenarios; `locals_` declares `url` and `auth` (an
    array) in the shell's own words."""
    return [
        f"__{prog}_scenarios() {{",
        *(f"    {line}" for line in locals_),
        f'    [[ -z "$url" && -f {SCENARIOS_URL_FILE} ]] && url="$(<{SCENARIOS_URL_FILE})"',
        f'    url="${{url:-{DEFAULT_DAEMON_URL}}}"',
        '    [[ -n "${REEF_TOKEN:-}" ]] && auth=(-H "Authorization: Bearer $REEF_TOKEN")',
        f'    curl -fsS -m 2 "${{auth[@]}}" "${{url%/}}{SCENARIOS_ROUTE_PATH}" 2>/dev/null \\',
        """        | grep -o '"scenario": *"[^"]*"' | sed 's/.*"\\([^"]*\\)"$/\\1/'""",
        "}",
    ]


@dataclass(frozen=True)
class OptionSpec:
    """An option: its names, help, and what its value completes to (choices, files, or anything)."""

    names: tuple[str, ...]  # long first: ("--type", "-t")
    help: str
    takes_value: bool
    choices: tuple[str, ...] = ()
    path: bool = False
    scenarios: bool = False  # completes to the running daemon's scenarios, asked when completing


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


def command_spec(root: TyperGroup, prog: str) -> CommandSpec:
    """The spec of the command tree under `root`."""
    return _spec(root, (prog,))


def _spec(command: Any, path: tuple[str, ...]) -> CommandSpec:
    ctx = typer.Context(command, info_name=path[-1])
    options: list[OptionSpec] = []
    choices: tuple[str, ...] = ()
    for param in command.params:
        if isinstance(param, TyperOption) and not param.hidden:
            options.append(_option(ctx, param))
        elif isinstance(param, TyperArgument) and not choices:
            choices = _choices(ctx, param)
    options.append(OptionSpec(("--help",), HELP, False))
    subcommands: tuple[CommandSpec, ...] = ()
    if isinstance(command, TyperGroup):
        subcommands = tuple(_spec(sub, (*path, name)) for name, sub in command.commands.items() if not sub.hidden)
    return CommandSpec(path, _first_sentence(command.help or ""), tuple(options), subcommands, choices)


def _option(ctx: typer.Context, param: TyperOption) -> OptionSpec:
    names = sorted(param.opts, key=lambda name: (not name.startswith("--"), name))
    takes_value = not param.is_flag and not param.count
    metavar = param.metavar or ""
    path = param.type_descriptor.is_path or "FILE" in metavar or metavar == "PATH"
    scenarios = takes_value and "--scenario" in names
    help = _first_sentence(param.help or "")
    return OptionSpec(tuple(names), help, takes_value, _choices(ctx, param), path, scenarios)


def _choices(ctx: typer.Context, param: TyperOption | TyperArgument) -> tuple[str, ...]:
    """The values the parameter offers: its choices, or what its autocompletion suggests (fixed when the script is
    generated, since completing never starts Python)."""
    return tuple(item.value for item in param.shell_complete(ctx, "") if item.type == "plain")


def _first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    sentence, dot, _rest = flat.partition(". ")
    return sentence + ("." if dot else "")
