"""The records list: newest first, rendered line by line so only the visible rows cost anything — a list of
100k records scrolls like one of ten. Older pages are asked for (`NearEnd`) as the cursor approaches the end."""

from __future__ import annotations

from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from reef_client import RecordRow
from reef_client.render.records import Column
from reef_contract import awaits_score
from reef_tui.widgets.record_columns import columns_for, fitted_widths, row_line

LOOKAHEAD = 60  # ask for the next older page when the cursor is this close to the end


class RecordList(ScrollView, can_focus=True):
    """Records newest first, with a cursor."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"record-list--cursor"}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home,g", "jump(0)", "Newest", show=False),
        Binding("end,G", "jump(-1)", "Oldest loaded", show=False),
        Binding("enter", "open", "Open", show=False),
    ]

    cursor: reactive[int] = reactive(0, always_update=True)

    class Opened(Message):
        """Enter (or a double click) on a record."""

        def __init__(self, row: RecordRow) -> None:
            super().__init__()
            self.row = row

    class Highlighted(Message):
        """The cursor is on another record (None: the list is empty)."""

        def __init__(self, row: RecordRow | None) -> None:
            super().__init__()
            self.row = row

    class NearEnd(Message):
        """The cursor or the view is close to the oldest loaded record."""

    class ColumnsChanged(Message):
        """The width changed the columns shown; headers follow."""

        def __init__(self, columns: list[Column]) -> None:
            super().__init__()
            self.columns = columns

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[RecordRow] = []
        self._columns: list[Column] = []
        self._widths = fitted_widths([])
        self._highlighted: str | None = None  # the id of the record last announced as Highlighted

    # --- content --------------------------------------------------------------------------------------------

    @property
    def columns(self) -> list[Column]:
        """The columns shown at the list's width."""
        return self._columns

    @property
    def current(self) -> RecordRow | None:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def set_rows(self, rows: list[RecordRow]) -> None:
        """Replace everything (a new filter) and put the cursor on the newest."""
        self.rows = list(rows)
        self._widths = fitted_widths(self.rows)
        self._resized()
        self.cursor = 0
        self.scroll_to(y=0, animate=False)

    def extend_older(self, rows: list[RecordRow]) -> None:
        """Append an older page, skipping records already shown."""
        shown = {row["id"] for row in self.rows[-len(rows) :]} if rows else set()
        self.rows.extend(row for row in rows if row["id"] not in shown)
        self._widths = fitted_widths(rows, self._widths)
        self._resized()

    def add_newest(self, row: RecordRow, *, follow: bool) -> None:
        """A record that just arrived. Following with the cursor on the newest record, the cursor moves to it;
        else the cursor stays on the record the person put it on."""
        if any(existing["id"] == row["id"] for existing in self.rows[:50]):
            return
        on_newest = self.cursor == 0
        self.rows.insert(0, row)
        self._widths = fitted_widths([row], self._widths)
        self._resized()
        if follow and on_newest:
            self.cursor = 0
            self.scroll_to(y=0, animate=False)
        elif len(self.rows) > 1:
            self.cursor += 1
            if self.scroll_offset.y > 0:
                self.scroll_to(y=self.scroll_offset.y + 1, animate=False)

    def set_score(self, record_ids: list[str], score: float | None) -> None:
        """A report scored these records."""
        wanted = set(record_ids)
        for row in self.rows:
            if row["id"] in wanted and row["type"] == "inference":
                row["score"] = score
        self.refresh()

    def move_to_next_unscored(self, scenario: str | None) -> None:
        """Put the cursor on the next older record awaiting a score (in a list of `scenario`, None: all), if one is
        loaded."""
        for index in range(self.cursor + 1, len(self.rows)):
            row = self.rows[index]
            if awaits_score(row, scenario):
                self.cursor = index
                return

    # --- rendering ------------------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        index = self.scroll_offset.y + y
        width = self.scrollable_content_region.width
        base = self.rich_style
        if index >= len(self.rows):
            return Strip.blank(width, base)
        line = row_line(self.rows[index], self._columns)
        style = base + self.get_component_rich_style("record-list--cursor") if index == self.cursor else base
        strip = Strip(line.render(self.app.console)).apply_style(style)
        return strip.extend_cell_length(width, style).crop(0, width)

    def on_resize(self, event: events.Resize) -> None:
        self._resized()

    def _resized(self) -> None:
        # The vertical scrollbar's column is kept free whether it shows or not, so rows never need a horizontal one.
        width = self.content_region.width - self.styles.scrollbar_size_vertical
        columns = columns_for(width, self._widths)
        if columns != self._columns:
            self._columns = columns
            self.post_message(self.ColumnsChanged(columns))
        self.virtual_size = Size(width, len(self.rows))
        self.refresh()

    def watch_cursor(self, cursor: int) -> None:
        if self.rows:
            self.scroll_to_region(Region(0, cursor, 1, 1), animate=False, force=True)
        current = self.current
        if (current["id"] if current else None) != self._highlighted:
            self._highlighted = current["id"] if current else None
            self.post_message(self.Highlighted(current))
        self._check_end()
        self.refresh()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self._check_end()

    def _check_end(self) -> None:
        bottom = self.scroll_offset.y + self.size.height
        if self.rows and max(self.cursor, bottom) >= len(self.rows) - LOOKAHEAD:
            self.post_message(self.NearEnd())

    # --- actions --------------------------------------------------------------------------------------------

    def action_move(self, delta: int) -> None:
        if self.rows:
            self.cursor = max(0, min(len(self.rows) - 1, self.cursor + delta))

    def action_page(self, direction: int) -> None:
        self.action_move(direction * max(1, self.size.height - 1))

    def action_jump(self, where: int) -> None:
        if self.rows:
            self.cursor = 0 if where == 0 else len(self.rows) - 1

    def action_open(self) -> None:
        if self.current is not None:
            self.post_message(self.Opened(self.current))

    def on_click(self, event: events.Click) -> None:
        index = self.scroll_offset.y + event.y
        if 0 <= index < len(self.rows):
            self.cursor = index
            if event.chain == 2:
                self.action_open()
