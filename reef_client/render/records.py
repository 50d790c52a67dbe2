"""Records as table rows. Every column has a fixed width, so the one-row tables `--follow` prints line up
under the header of the first; on a narrow terminal the least useful columns are left out, never the receipt. A
score derived with no person carries its source's letter (`0.8 n`: judged from the next turn), and a derived
report's row a line under it that says where it came from (the turn it was read from, and why)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rich.console import Group, JustifyMethod, RenderableType
from rich.table import Table
from rich.text import Text

from reef_client import RecordRow
from reef_client.render import formats


@dataclass(frozen=True)
class Column:
    """A column of the records table: its header, width, and how long it is kept on a narrow terminal."""

    name: str
    width: int
    keep: int  # lower is kept longer when the terminal is narrow
    right: bool = False


COLUMNS = (
    Column("receipt", 32, 0),
    Column("time", 8, 4),
    Column("scenario", 14, 5),
    Column("route", 12, 6),
    Column("model", 14, 8),
    Column("status", 6, 1, right=True),
    Column("latency", 8, 3, right=True),
    Column("tokens", 11, 7, right=True),
    Column("score", 6, 2, right=True),
)


def fitting_columns(width: int) -> list[Column]:
    """The columns that fit in `width` characters (one space between columns), in display order."""
    chosen: list[Column] = []
    used = -1
    for column in sorted(COLUMNS, key=lambda c: c.keep):
        if used + 1 + column.width <= width or not chosen:
            chosen.append(column)
            used += 1 + column.width
    return [column for column in COLUMNS if column in chosen]


def records_table(rows: Iterable[RecordRow], *, width: int, header: bool = True) -> Table:
    """A table of records in the order given, as wide as fits in `width`."""
    columns = fitting_columns(width)
    table = Table(box=None, show_header=header, header_style="bold", padding=(0, 1, 0, 0), pad_edge=False)
    for column in columns:
        justify: JustifyMethod = "right" if column.right else "left"
        table.add_column(column.name, width=column.width, justify=justify, no_wrap=True, overflow="ellipsis")
    for row in rows:
        cells = record_cells(row)
        if row["type"] != "inference":
            # A report or request has no HTTP status: its type takes the status column, which every width keeps.
            cells["status"] = Text(row["type"], style="cyan")
        table.add_row(*(cells[column.name] for column in columns))
    return table


def records_view(
    rows: Iterable[RecordRow], notes: Mapping[str, str], *, width: int, header: bool = True
) -> RenderableType:
    """The records table with, under each row `notes` has a line for (by receipt), that line: the table is cut
    there and goes on below it, its fixed-width columns lining up."""
    pieces: list[RenderableType] = []
    waiting: list[RecordRow] = []
    for row in rows:
        waiting.append(row)
        note = notes.get(row["id"])
        if note:
            pieces.append(records_table(waiting, width=width, header=header and not pieces))
            pieces.append(Text(f"  ↳ {note}", style="dim", no_wrap=True, overflow="ellipsis"))
            waiting = []
    if waiting or not pieces:
        pieces.append(records_table(waiting, width=width, header=header and not pieces))
    return Group(*pieces)


def record_cells(row: RecordRow) -> dict[str, str | Text]:
    """The cells of one record by column name."""
    status: str | Text = formats.MISSING if row["status"] is None else str(row["status"])
    if row["complete"] is False or (row["status"] or 0) >= 400:
        status = Text(f"{row['status'] or ''}✗", style="red")
    return {
        "receipt": row["id"],
        "time": formats.clock(row["created_at"]),
        "scenario": row["scenario"],
        "route": formats.route(row["route"], row["type"]),
        "model": row["model"] or formats.MISSING,
        "status": status,
        "latency": formats.latency(row["duration_ms"]),
        "tokens": formats.tokens(dict(row["usage"]) if row.get("usage") else None),
        "score": formats.sourced_score(row["score"], row.get("source")),
    }
