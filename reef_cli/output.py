"""Where the CLI writes: rich consoles made when needed (so tests that swap stdout see the output), JSON lines,
and the one-line error every expected failure becomes."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer
from rich.console import Console


def console() -> Console:
    """A console on the current stdout."""
    return Console(file=sys.stdout, highlight=False)


def error_console() -> Console:
    """A console on the current stderr."""
    return Console(file=sys.stderr, highlight=False)


def print_json(value: Any) -> None:
    """One JSON document on one line of stdout."""
    typer.echo(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def print_answer(value: Any, json: bool, line: str) -> None:
    """The daemon's answer as one JSON line with --json; otherwise `line`, what it means to a person."""
    if json:
        print_json(value)
    else:
        typer.echo(line)


def say_error(message: str) -> None:
    """One line on stderr, prefixed with `reef:`."""
    typer.echo(f"reef: {message}", err=True)


def fail(message: str, code: int = 1) -> NoReturn:
    """Say what went wrong in one line and exit with `code` (1 failure, 2 bad usage)."""
    say_error(message)
    raise typer.Exit(code)
