"""The settings panels of `reef serve --help` and `reef start --help`, drawn so that no setting's name is cut.

Typer lays an options panel out as a table whose columns all shrink on a narrow terminal: at 80 columns the longest
names (`--embedded.sglang-start-timeout-s`) end in an ellipsis. A name is what a user types, so these panels keep
each name and its value's form whole and wrap only the help (folding a word too long for its column, as a list
setting's default), in typer's styles.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from typer import rich_utils
from typer.core import TyperOption


def settings_panels(options: Iterable[TyperOption]) -> list[Panel]:
    """One panel per `rich_help_panel` of `options` (`reef settings`, `inference settings`, ...), in their order."""
    tables: dict[str, Table] = {}
    for option in options:
        title = option.rich_help_panel or "settings"
        table = tables.get(title) or tables.setdefault(title, _panel_table())
        table.add_row(
            Text(option.opts[0], style=rich_utils.STYLE_OPTION),
            Text(option.metavar or "", style=rich_utils.STYLE_TYPES),
            Text(option.help or ""),
        )
    return [
        Panel(
            table,
            title=title,
            title_align=rich_utils.ALIGN_OPTIONS_PANEL,
            border_style=rich_utils.STYLE_OPTIONS_PANEL_BORDER,
        )
        for title, table in tables.items()
    ]


def _panel_table() -> Table:
    table = Table(show_header=False, box=None, expand=True, pad_edge=False, padding=(0, 1))
    table.add_column(no_wrap=True)  # the name
    table.add_column(no_wrap=True)  # its value's form: PORT, on|off, ...
    table.add_column(ratio=1, overflow="fold")  # the help, the one column that gives way
    return table
