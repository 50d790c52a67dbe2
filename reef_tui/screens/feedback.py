"""The feedback box: a line of text sent as the report's feedback for one record."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class FeedbackScreen(ModalScreen[str | None]):
    """Dismisses with the text typed (enter), or None (escape)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, record_id: str) -> None:
        super().__init__()
        self.record_id = record_id

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"Feedback on {self.record_id}", classes="dialog-title")
            yield Input(placeholder="what was good or wrong about this answer", id="feedback-text")
            yield Label("enter sends · escape cancels", classes="dialog-hint")

    def on_input_submitted(self, message: Input.Submitted) -> None:
        text = message.value.strip()
        if not text:
            self.notify("type some feedback first, or press escape", severity="warning")
            return
        self.dismiss(text)
