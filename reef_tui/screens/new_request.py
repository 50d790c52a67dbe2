"""The change-request box: what `/reefine <text>` or `reef request` would send, for the chosen scenario."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

MAX_TEXT = 4000  # the daemon refuses longer requests


class NewRequestScreen(ModalScreen[str | None]):
    """Dismisses with the request text (enter), or None (escape)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, scenario: str, caution: str | None = None) -> None:
        super().__init__()
        self.scenario = scenario
        self.caution = caution  # what to know before filing (the served model is too small to write a change)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"Change request for {self.scenario}", classes="dialog-title")
            if self.caution:
                yield Label(self.caution, id="request-caution")
            yield Input(placeholder="what should the harness do differently?", max_length=MAX_TEXT, id="request-text")
            yield Label("enter files it · escape cancels", classes="dialog-hint")

    def on_input_submitted(self, message: Input.Submitted) -> None:
        text = message.value.strip()
        if not text:
            self.notify("say what to change first, or press escape", severity="warning")
            return
        self.dismiss(text)
