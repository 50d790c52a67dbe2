"""The records list's columns: the `reef records` columns (widths and cells from `reef_client.render.records`) with the
receipt shortened as git shortens hashes and the model and scenario as wide as the longest loaded, then the first
words of the exchange in whatever width is left. Columns are chosen by what matters on screen."""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text

from reef_client import RecordRow
from reef_client.render.records import COLUMNS, Column, record_cells
from reef_tui.receipts import SHORT, short

WORDS = "words"  # what was asked → the start of the answer
WORDS_MIN = 24
FITTED = {"model": (5, 40), "scenario": (8, 24)}  # these columns fit the longest value loaded, within these bounds
Widths = dict[str, int]
# Most important first; the full receipt is in the detail screen and on copy.
PRIORITY = ("time", "score", "status", WORDS, "latency", "scenario", "receipt", "route", "tokens", "model")
HEADERS = {WORDS: "asked → answered"}


def fitted_widths(rows: list[RecordRow], before: Widths | None = None) -> Widths:
    """The widths of the FITTED columns for `rows` (never narrower than `before`): the longest value, within
    bounds."""
    widths = {}
    for name, (least, most) in FITTED.items():
        longest = max((len(str(row.get(name) or "")) for row in rows), default=0)
        widths[name] = max((before or {}).get(name, least), min(most, longest))
    return widths


def columns_for(width: int, fitted: Widths | None = None) -> list[Column]:
    """The columns that fit in `width` cells (one space between), in display order; the words take the rest."""
    by_name = {column.name: column for column in COLUMNS}
    by_name["receipt"] = replace(by_name["receipt"], width=SHORT)
    for name, fit in (fitted or fitted_widths([])).items():
        by_name[name] = replace(by_name[name], width=fit)
    by_name[WORDS] = Column(WORDS, WORDS_MIN, 9)
    chosen: set[str] = set()
    used = 0
    for name in PRIORITY:
        needed = by_name[name].width + (1 if chosen else 0)
        if used + needed <= width:
            chosen.add(name)
            used += needed
    if WORDS in chosen:
        by_name[WORDS] = replace(by_name[WORDS], width=WORDS_MIN + width - used)
    return [by_name[column.name] for column in (*COLUMNS, by_name[WORDS]) if column.name in chosen]


def header_line(columns: list[Column]) -> Text:
    return _line({column.name: HEADERS.get(column.name, column.name) for column in columns}, columns)


def row_line(row: RecordRow, columns: list[Column]) -> Text:
    cells = record_cells(row)
    cells["receipt"] = short(row["id"])
    cells[WORDS] = words(row)
    return _line(cells, columns)


def words(row: RecordRow) -> Text:
    """`asked → answered`, the answer dimmed; empty for records without words (reports, failed exchanges)."""
    preview = row.get("preview")
    text = Text()
    if preview is None:
        return text
    if preview["asked"]:
        text.append(preview["asked"])
    answered = preview["answered"]
    if answered:
        if not answered.startswith("→"):  # tool calls come with their arrow
            answered = f"→ {answered}"
        text.append(" " if text else "")
        text.append(answered, style="italic")
    return text


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
