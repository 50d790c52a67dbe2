"""The records list's columns: the `reef records` columns (widths and cells from `reef_cli.render.records`),
chosen by what matters on screen — the receipt is shown only when everything else fits."""

from __future__ import annotations

from rich.text import Text

from reef_cli.client import RecordRow
from reef_cli.render.records import COLUMNS, Column, record_cells

# Most important first; the receipt is last because the detail screen shows it.
PRIORITY = ("time", "score", "status", "latency", "scenario", "route", "tokens", "model", "receipt")


def columns_for(width: int) -> list[Column]:
    """The columns that fit in `width` cells (one space between), in display order."""
    by_name = {column.name: column for column in COLUMNS}
    chosen: set[str] = set()
    used = 0
    for name in PRIORITY:
        needed = by_name[name].width + (1 if chosen else 0)
        if used + needed <= width:
            chosen.add(name)
            used += needed
    return [column for column in COLUMNS if column.name in chosen]


def header_line(columns: list[Column]) -> Text:
    return _line({column.name: column.name for column in columns}, columns)


def row_line(row: RecordRow, columns: list[Column]) -> Text:
    return _line(record_cells(row), columns)


def _line(cells: dict[str, str | Text], columns: list[Column]) -> Text:
    line = Text(no_wrap=True, end="")
    for position, column in enumerate(columns):
        cell = cells[column.name]
        text = cell.copy() if isinstance(cell, Text) else Text(cell)
        text.truncate(column.width, overflow="ellipsis")
        text.align("right" if column.right else "left", column.width)
        if position:
            line.append(" ")
        line.append_text(text)
    return line
