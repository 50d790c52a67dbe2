"""Records, newest first and live, with the first words of each exchange: filter by scenario, type and unscored;
follow new ones; score with one key; export the list's scenario to a file; on a tall terminal, the selected
record's exchange in a pane under the list."""

from __future__ import annotations

from asyncio import to_thread
from dataclasses import replace
from typing import Any, ClassVar

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import ActiveBinding, Binding, BindingType
from textual.widgets import Static

from reef_client import Event, RecordDetail, RecordPage, RecordRow, ReefClientError
from reef_contract import ScoreScale, awaits_score
from reef_tui.bindings import HELP, score_bindings
from reef_tui.exporting import ExportChoice, export_records
from reef_tui.help_sections import keys_section, scores_section
from reef_tui.receipts import abbreviated
from reef_tui.reporting import send_report
from reef_tui.scoring import key_score
from reef_tui.screens.export import ExportScreen
from reef_tui.screens.feedback import FeedbackScreen
from reef_tui.screens.record_detail import RecordDetailScreen
from reef_tui.screens.reef_screen import ReefScreen
from reef_tui.widgets.record_columns import header_line
from reef_tui.widgets.record_list import RecordList
from reef_tui.widgets.record_preview import RecordPreview

PAGE = 200
TYPES = ("inference", None, "report", "request")  # `y` cycles through these; None is every type
PREVIEW_HEIGHT = 36  # rows of terminal from which the preview pane shows under the list
FOOTER_ROOM = 88  # columns from which the footer has room for `x Export` beside the keys it always shows

RECORDS_NOTE = """\
Each row shows what was asked and the start of the answer; receipts are shortened (`c` copies the whole one).
On a tall terminal a pane under the list shows the selected exchange. With follow on, the cursor moves to each
new record only while it is on the newest; put it anywhere else and it stays there. `x` exports the list's
scenario to a JSON lines file (openai, preference or tokens), as `reef export` does, while the list stays live."""


class RecordsScreen(ReefScreen):
    """The main screen."""

    SUB_TITLE = "records"
    HELP_TITLE = "Records"
    VERTICAL_BREAKPOINTS = [(0, "-short"), (PREVIEW_HEIGHT, "-tall")]
    BINDINGS: ClassVar[list[BindingType]] = [
        HELP,
        *score_bindings(),
        Binding("f", "feedback", "Feedback"),
        Binding("u", "toggle_unscored", "Unscored"),
        Binding("y", "next_type", "Type", show=False),
        Binding("l", "toggle_follow", "Follow"),
        Binding("x", "export", "Export"),
        Binding("c", "copy_receipt", "Copy receipt", show=False),
    ]

    @classmethod
    def help_sections(cls, scale: ScoreScale) -> list[str]:
        """The list's keys and how it behaves, the score keys on `scale`, then the record detail it opens."""
        records = keys_section(cls.HELP_TITLE, [*cls.BINDINGS, *RecordList.BINDINGS]) + "\n\n" + RECORDS_NOTE
        return [records, scores_section(scale), *RecordDetailScreen.help_sections(scale)]

    def __init__(self) -> None:
        super().__init__()
        self.record_type: str | None = TYPES[0]
        self.unscored = False
        self.follow = True
        self._older_from: int | None = None  # `before` of the next older page; None when all are loaded
        self._loading_older = False
        self._generation = 0  # bumped on every reload, so a late page of an old filter is dropped

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        """Textual's, less `x Export` in the footer of a narrow terminal (help and the palette still list it),
        so that `q Quit` and `s Scenario` keep their place at 80 columns."""
        bindings = super().active_bindings
        if self.size.width >= FOOTER_ROOM:
            return bindings
        return {
            key: active._replace(binding=replace(active.binding, show=False)) if active.binding.action == "export"
            else active
            for key, active in bindings.items()
        }  # fmt: skip

    def compose_body(self) -> ComposeResult:
        yield Static(id="filters")
        yield Static(id="records-header")
        yield RecordList(id="records")
        yield RecordPreview(id="record-preview")

    # --- loading --------------------------------------------------------------------------------------------

    def reload(self) -> None:
        """Load the newest page for the current filters."""
        self._generation += 1
        self._show_filters()
        self._load_newest(self._generation)

    # Workers are started through `work` (which calls the method when its worker starts): a worker cancelled before
    # it starts, as an exclusive group's older work is, then leaves no coroutine unawaited.
    @work(group="records", exclusive=True)
    async def _load_newest(self, generation: int) -> None:
        await self._load_page(generation, None)

    @work(group="older")
    async def _load_older(self, generation: int, before: int) -> None:
        await self._load_page(generation, before)

    async def _load_page(self, generation: int, before: int | None) -> None:
        try:
            page = await self._fetch(before)
        except ReefClientError as exc:
            self.query_one("#filters", Static).update(Text(exc.message, style="red"))
            return
        finally:
            if before is not None:
                self._loading_older = False
        if generation != self._generation:
            return
        records = self.query_one(RecordList)
        if before is None:
            records.set_rows(page["records"])
        else:
            records.extend_older(page["records"])
        self._older_from = page["next_before"]

    async def _fetch(self, before: int | None) -> RecordPage:
        return await to_thread(
            self.reef.client.records,
            scenario=self.reef.scenario,
            type=self.record_type,
            unscored=self.unscored,
            before=before,
            limit=PAGE,
        )

    def on_record_list_near_end(self, message: RecordList.NearEnd) -> None:
        if self._older_from is not None and not self._loading_older:
            self._loading_older = True
            self._load_older(self._generation, self._older_from)

    def on_record_list_columns_changed(self, message: RecordList.ColumnsChanged) -> None:
        self.query_one("#records-header", Static).update(header_line(message.columns))

    def _on_connection(self, connected: bool | None) -> None:
        if connected:
            self._show_filters()

    # --- live -----------------------------------------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        records = self.query_one(RecordList)
        report = event.report
        if report is not None:
            references = report["references"]
            if report["score"] is not None:
                records.set_score(references, report["score"])
            if self.query_one(RecordPreview).shown in references:
                self._preview_current(again=True)  # its score changed
        row = event.record
        if row is None or not self._wanted(row):
            return
        records.add_newest(row, follow=self.follow)

    def _wanted(self, row: RecordRow) -> bool:
        scenario = self.reef.scenario
        return (
            (scenario is None or row.get("scenario") == scenario)
            and (self.record_type is None or row.get("type") == self.record_type)
            and (not self.unscored or awaits_score(row, scenario))
        )

    # --- actions --------------------------------------------------------------------------------------------

    def on_record_list_opened(self, message: RecordList.Opened) -> None:
        self.app.push_screen(RecordDetailScreen(message.row["id"]))

    def on_record_list_highlighted(self, message: RecordList.Highlighted) -> None:
        self._preview_current()

    def on_resize(self, event: events.Resize) -> None:
        self.refresh_bindings()  # the footer shows `x Export` only when wide enough
        self._preview_current()

    def _preview_current(self, *, again: bool = False) -> None:
        """Load the record under the cursor into the pane, when the terminal is tall enough to show it and it
        shows another record (or `again`)."""
        if self.size.height < PREVIEW_HEIGHT:
            return
        pane, row = self.query_one(RecordPreview), self.query_one(RecordList).current
        if row is None:
            pane.say("no record selected")
        elif again or pane.shown != row["id"]:
            self._preview(row["id"])

    @work(group="preview", exclusive=True)
    async def _preview(self, record_id: str) -> None:
        """Load the selected record into the pane (a newer selection cancels this one)."""
        try:
            record: RecordDetail = await to_thread(self.reef.client.record, record_id)
        except ReefClientError as exc:
            self.query_one(RecordPreview).say(exc.message, error=True)
            return
        self.query_one(RecordPreview).show(record)

    def action_score(self, key: str) -> None:
        row = self._scoreable()
        if row is not None:
            score = key_score(key, self.reef.score_scale)
            send_report(
                self, row["scenario"], row["id"], score=score, replaces=row["score"], done=self._scored(row["id"])
            )

    def action_copy_receipt(self) -> None:
        row = self.query_one(RecordList).current
        if row is not None:
            self.app.copy_to_clipboard(row["id"])
            self.notify(f"copied the receipt {row['id']}", timeout=3)

    def action_feedback(self) -> None:
        row = self._scoreable()
        if row is None:
            return

        def sent(text: str | None) -> None:
            if text:
                send_report(self, row["scenario"], row["id"], feedback=text, done=self._scored(row["id"]))

        self.app.push_screen(FeedbackScreen(row["id"]), sent)

    def _scoreable(self) -> RecordRow | None:
        row = self.query_one(RecordList).current
        if row is None:
            self.notify("no record selected", severity="warning")
            return None
        if row["type"] != "inference":
            self.notify(f"a {row['type']} record takes no score; choose an inference record", severity="warning")
            return None
        return row

    def _scored(self, record_id: str) -> Any:
        def done(score: float | None) -> None:
            records = self.query_one(RecordList)
            if score is not None:
                records.set_score([record_id], score)
            if records.current is not None and records.current["id"] == record_id:
                records.move_to_next_unscored(self.reef.scenario)
            shown = abbreviated(record_id)
            self.notify(f"scored {shown}: {score:g}" if score is not None else f"feedback sent on {shown}", timeout=3)

        return done

    def action_export(self) -> None:
        """Ask what to export (the list's scenario, or one to choose), then write it in a worker."""
        if self.reef.scenario is None and not self.reef.scenario_names:
            self.notify("no scenario has records to export yet", severity="warning")
            return

        def chosen(choice: ExportChoice | None) -> None:
            if choice is not None:
                export_records(self, choice)

        self.app.push_screen(ExportScreen(self.reef.scenario, self.reef.scenario_names), chosen)

    def action_toggle_unscored(self) -> None:
        self.unscored = not self.unscored
        self.reload()

    def action_next_type(self) -> None:
        self.record_type = TYPES[(TYPES.index(self.record_type) + 1) % len(TYPES)]
        self.reload()

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        self._show_filters()
        if self.follow:
            self.query_one(RecordList).action_jump(0)

    def _show_filters(self) -> None:
        parts = [  # each with the key that changes it
            f"scenario [b]{self.reef.scenario or 'all'}[/b] (s)",
            f"type [b]{self.record_type or 'all'}[/b] (y)",
            f"unscored [b]{'only' if self.unscored else 'too'}[/b] (u)",
            f"follow [b]{'on' if self.follow else 'off'}[/b] (l)",
        ]
        self.query_one("#filters", Static).update(Text.from_markup("  ".join(parts)))
