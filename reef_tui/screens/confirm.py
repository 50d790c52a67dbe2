"""A yes/no question before anything that changes what a scenario serves."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label


class ConfirmScreen(ModalScreen[bool]):
    """Dismisses with True (y / the confirm button) or False (n / escape)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str, confirm: str) -> None:
        super().__init__()
        self.question = question
        self.confirm = confirm

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question, classes="dialog-title")
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.confirm} (y)", variant="warning", id="yes")
                yield Button("cancel (n)", id="no")

    def on_button_pressed(self, message: Button.Pressed) -> None:
        self.dismiss(message.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
