"""One record in full, as `reef show` renders it (the conversation as markdown, tool calls, the streamed answer,
timings, tokens, serving version, reports); scored with the same keys as the list."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from reef_client import Event, RecordDetail, ReefClientError
from reef_client.render.record import record_view
from reef_tui.bindings import HELP, score_bindings
from reef_tui.receipts import abbreviated
from reef_tui.reporting import send_report
from reef_tui.scoring import SCORE_HINT, key_score
from reef_tui.screens.feedback import FeedbackScreen
from reef_tui.screens.reef_screen import ReefScreen


class RecordDetailScreen(ReefScreen):
    """Pushed over the records list; escape goes back."""

    SUB_TITLE = "record"
    HELP_TITLE = "Record detail"
    FOLLOWS_APP = False  # the record stays whatever the scenario
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        HELP,
        *score_bindings(),
        Binding("f", "feedback", "Feedback"),
    ]

    def __init__(self, record_id: str) -> None:
        super().__init__()
        self.record_id = record_id
        self.record: RecordDetail | None = None

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id="detail-scroll"):
            yield Static(Text(f"loading {self.record_id} …"), id="detail")

    def reload(self) -> None:
        self.run_worker(self._load, thread=True, group="detail", exclusive=True)

    def _load(self) -> None:
        try:
            record = self.reef.client.record(self.record_id)
        except ReefClientError as exc:
            self.app.call_from_thread(self._show_error, exc.message)
            return
        self.app.call_from_thread(self._show, record)

    def _show(self, record: RecordDetail) -> None:
        self.record = record
        self.query_one("#detail", Static).update(record_view(record, how_to_score=SCORE_HINT))

    def _show_error(self, message: str) -> None:
        if self.record is None:
            self.query_one("#detail", Static).update(Text(message, style="red"))

    def _on_event(self, event: Event) -> None:
        report = event.report
        if report is not None and self.record_id in report["references"]:
            self.reload()

    def action_score(self, key: str) -> None:
        if self._scoreable():
            earlier = self.record.get("score") if self.record else None
            score = key_score(key, self.reef.score_scale)
            send_report(self, self._scenario(), self.record_id, score=score, replaces=earlier, done=self._sent)

    def action_feedback(self) -> None:
        if not self._scoreable():
            return

        def sent(text: str | None) -> None:
            if text:
                send_report(self, self._scenario(), self.record_id, feedback=text, done=self._sent)

        self.app.push_screen(FeedbackScreen(self.record_id), sent)

    def _scoreable(self) -> bool:
        if self.record is None or self.record.get("type") != "inference":
            self.notify("only a loaded inference record takes a score", severity="warning")
            return False
        return True

    def _scenario(self) -> str:
        return self.record["scenario"] if self.record else "None"

    def _sent(self, score: float | None) -> None:
        shown = abbreviated(self.record_id)
        self.notify(f"scored {shown}: {score:g}" if score is not None else f"feedback sent on {shown}", timeout=3)
        self.reload()
