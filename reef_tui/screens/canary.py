"""The canary box: which share of new sessions a version is served to beside the served one, as `reef promote
--canary N vN` asks it; a whole percentage from 1 to 99, 20 unless changed."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

DEFAULT_SHARE = 20
LOWEST_SHARE, HIGHEST_SHARE = 1, 99
BAD_SHARE = f"the share is a whole percentage from {LOWEST_SHARE} to {HIGHEST_SHARE}, such as {DEFAULT_SHARE}"


def share_of(text: str) -> int | None:
    """The share typed (`20`, `20%`), or None when it is not a whole number from 1 to 99."""
    typed = text.strip().removesuffix("%").strip()
    if not typed.isdecimal():
        return None
    share = int(typed)
    return share if LOWEST_SHARE <= share <= HIGHEST_SHARE else None


class CanaryScreen(ModalScreen[int | None]):
    """Dismisses with the share in percent (enter, once it is valid), or None (escape)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, scenario: str, version: str, replaces: str | None) -> None:
        """`replaces`: the version of the canary that already runs (starting this one ends it), if any."""
        super().__init__()
        self.scenario = scenario
        self.version = version
        self.replaces = replaces

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"Canary {self.version} of {self.scenario}", classes="dialog-title")
            yield Label(f"Share of new sessions it serves, in % ({LOWEST_SHARE} to {HIGHEST_SHARE}):")
            yield Input(str(DEFAULT_SHARE), id="canary-share")
            yield Label("", id="canary-problem")
            ends = f" · the canary of {self.replaces} ends" if self.replaces else ""
            yield Label(f"enter starts it{ends} · escape cancels", classes="dialog-hint")

    def on_input_submitted(self, message: Input.Submitted) -> None:
        share = share_of(message.value)
        if share is None:
            self.query_one("#canary-problem", Label).update(BAD_SHARE)
            return
        self.dismiss(share)
