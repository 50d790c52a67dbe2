"""The daemon's settings as options of `reef serve` and `reef start`, made from their declarations.

Every setting of `reef_daemon.settings.catalogue()` (the daemon's and the built-in recipes' sections) becomes an
option named after its key (`--reef.port VALUE` or `--reef.port=VALUE`; `--reef.state_dir` names `--reef.state-dir`
too), listed by `--help` with its help, default and environment variable, and completed by the shell scripts. The
command gets the ones given as one mapping of raw strings: checking them is `load_settings`'s job, so a bad value reads
the same from the command line, a file or the environment. A mistake on the command line is one line and exit status
2, as every settings error is.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import typer
from rich.align import Align
from rich.padding import Padding
from rich.text import Text
from typer import rich_utils
from typer._click import Context, HelpFormatter
from typer._click.exceptions import BadOptionUsage, NoSuchOption
from typer.core import TyperCommand, TyperOption

from reef_cli.settings_help import settings_panels
from reef_daemon.builtin_recipes import BUILTIN_RECIPES
from reef_daemon.setting_kinds import SettingsError
from reef_daemon.settings import SettingInfo, canonical_key, catalogue

Command = Callable[..., None]


def _normalize(token: str) -> str:
    return token.replace("_", "-").lower()


# Unknown options and stray words are reported by `SettingsCommand`, in the words of every other settings error.
SETTINGS_CONTEXT: dict[str, Any] = {"allow_extra_args": True, "token_normalize_func": _normalize}


def _parameter_name(key: str) -> str:
    return "setting_" + key.replace(".", "__").replace("-", "_")


SETTINGS = catalogue()
_KEYS = {_parameter_name(key): key for key in SETTINGS}


def _recipe_names() -> list[str]:
    return list(BUILTIN_RECIPES)


def adapter_names() -> list[str]:
    """The agents a harness can be rendered and installed for."""
    from adapters import ADAPTERS

    return list(ADAPTERS)


# Values a shell offers for a setting; any other value may still be given (a recipe can be package.module:Class).
_SUGGESTIONS: dict[str, Callable[[], list[str]]] = {
    "recipe": _recipe_names,
    "harness.adapter": adapter_names,
    "harness.trial": lambda: ["auto", "off"],
    "harness.sandbox": lambda: ["bwrap", "none"],
}


def _choices_of(info: SettingInfo) -> Callable[[], list[str]] | None:
    """The words a setting of a few (`one_of`) takes, for completion."""
    choices = list(info.kind.choices)
    return (lambda: choices) if choices else None


def _help(info: SettingInfo) -> str:
    notes = []
    if not info.secret and info.default not in (None, ()):
        notes.append(f"default: {_as_typed(info.default)}")
    if info.env:
        notes.append(f"env: {info.env}")
    return f"{info.help} ({'; '.join(notes)})" if notes else info.help


def _as_typed(value: object) -> str:
    """A value as it is written on the command line: a list as `a,b,c`."""
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def _option(info: SettingInfo) -> inspect.Parameter:
    option = typer.Option(
        None,
        f"--{info.key}",
        metavar=info.kind.metavar,
        help=_help(info),
        show_default=False,
        rich_help_panel=f"{info.section} settings" if info.section else None,
        autocompletion=_SUGGESTIONS.get(info.key) or _choices_of(info),
    )
    return inspect.Parameter(
        _parameter_name(info.key), inspect.Parameter.KEYWORD_ONLY, default=option, annotation=str | None
    )


def with_setting_options(command: Command) -> Command:
    """`command` with an option for every declared setting; it receives those given as `overrides`, a mapping of
    canonical key to raw string (`{"reef.port": "8900"}`). Register it with `cls=SettingsCommand` and
    `context_settings=SETTINGS_CONTEXT`."""
    signature = inspect.signature(command, eval_str=True)
    own = [parameter for parameter in signature.parameters.values() if parameter.name != "overrides"]

    @functools.wraps(command)
    def with_overrides(*args: Any, **kwargs: Any) -> None:
        given = {key: kwargs.pop(name) for name, key in _KEYS.items()}
        command(*args, overrides={key: value for key, value in given.items() if value is not None}, **kwargs)

    setattr(  # noqa: B010 (typer reads the options from the signature)
        with_overrides, "__signature__", signature.replace(parameters=[*own, *map(_option, SETTINGS.values())])
    )
    return with_overrides


def as_arguments(overrides: Mapping[str, str]) -> list[str]:
    """The command-line words that give these settings again (`reef start` hands them to `reef serve`)."""
    return [word for key, value in overrides.items() for word in (f"--{key}", value)]


class SettingsCommand(TyperCommand):
    """A command taking the settings as options, whose command-line mistakes are one line naming the setting."""

    error_prefix: ClassVar[str] = "reef"

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        try:
            rest = super().parse_args(ctx, args)
            if rest:
                raise SettingsError(f"unexpected argument '{rest[0]}'; settings look like --reef.port 8900")
            return rest
        except NoSuchOption as exc:
            problem = _unknown(exc.option_name)
        except BadOptionUsage as exc:
            problem = _missing_value(exc)
        except SettingsError as exc:
            problem = str(exc)
        typer.echo(f"{self.error_prefix}: {problem}", err=True)
        raise typer.Exit(2)

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        """Typer's help for the command's own options, then the settings' panels with every name whole
        (reef_cli/settings_help.py), then the example."""
        if self.rich_markup_mode is None:
            super().format_help(ctx, formatter)
            return
        settings = [param for param in self.params if isinstance(param, TyperOption) and param.rich_help_panel]
        own = copy.copy(self)
        own.params = [param for param in self.params if param not in settings]
        own.epilog = None
        TyperCommand.format_help(own, ctx, formatter)
        console = rich_utils._get_rich_console()
        for panel in settings_panels(settings):
            console.print(panel)
        if self.epilog:
            console.print(Padding(Align(Text(self.epilog), pad=False), 1))


def _unknown(option: str) -> str:
    try:
        canonical_key(option)
    except SettingsError as exc:
        return str(exc)
    return f"unknown option '{option}'"  # a setting's name, but not an option of this command


def _missing_value(exc: BadOptionUsage) -> str:
    key = exc.option_name.removeprefix("--")
    if key in SETTINGS:  # every setting takes a value, so this is the only way to misuse one
        return f"setting {key} needs a value, as in --{key} VALUE"
    return exc.format_message()
