"""The export dialog: which scenario (the records list's, or one to choose when it shows them all), which format,
an optional least score, and the file to write; what `reef export` asks on its command line."""

from __future__ import annotations

import math
from pathlib import Path
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, RadioButton, RadioSet, Select

from reef_client import unwritable
from reef_contract import EXPORT_FORMATS
from reef_tui.exporting import ExportChoice

FORMAT_NOTES = {
    "openai": "chat fine-tuning lines, tool calls included",
    "preference": "chosen/rejected pairs of one prompt (DPO)",
    "tokens": "token ids and log-probs (embedded model)",
}


def default_file(scenario: str | None, format: str) -> str:
    """The file offered until the person types another: `<scenario>-<format>.jsonl` in the current folder."""
    return f"{scenario or 'records'}-{format}.jsonl"


class ExportScreen(ModalScreen[ExportChoice | None]):
    """Dismisses with what to export (enter in a field), or None (escape). A path that cannot be written is
    refused here, with the reason, so the person can correct it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, scenario: str | None, scenarios: list[str]) -> None:
        """`scenario` is the list's; when None (the list shows every scenario), the dialog asks which of
        `scenarios` to export."""
        super().__init__()
        self.scenario = scenario
        self.scenarios = scenarios
        self._offered = default_file(scenario, EXPORT_FORMATS[0])

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="export-dialog"):
            if self.scenario is not None:
                yield Label(f"Export the records of {self.scenario}", classes="dialog-title")
            else:
                yield Label("Export the records of", classes="dialog-title")
                choices = [(name, name) for name in self.scenarios]
                yield Select(choices, prompt="choose a scenario", id="export-scenario")
            with RadioSet(id="export-format"):
                for index, format in enumerate(EXPORT_FORMATS):
                    yield RadioButton(f"{format:<11}{FORMAT_NOTES[format]}", value=index == 0, name=format)
            with Horizontal(id="export-fields"):
                yield Input(self._offered, placeholder="file to write", id="export-file")
                yield Input(placeholder="min score", type="number", id="export-min-score")
            yield Label("enter exports (replaces the file) · escape cancels", classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one("#export-file", Input).focus()

    # --- the offered file name follows the scenario and format until the person types another -----------------

    def on_radio_set_changed(self, message: RadioSet.Changed) -> None:
        self._offer_again()

    def on_select_changed(self, message: Select.Changed) -> None:
        self._offer_again()

    def _offer_again(self) -> None:
        field = self.query_one("#export-file", Input)
        offered = default_file(self._scenario(), self._format())
        if field.value == self._offered:
            field.value = offered
        self._offered = offered

    def _scenario(self) -> str | None:
        if self.scenario is not None:
            return self.scenario
        chosen = self.query_one("#export-scenario", Select).selection
        return None if chosen is None else str(chosen)

    def _format(self) -> str:
        pressed = self.query_one("#export-format", RadioSet).pressed_button
        return str(pressed.name) if pressed is not None and pressed.name else EXPORT_FORMATS[0]

    # --- enter ----------------------------------------------------------------------------------------------

    def on_input_submitted(self, message: Input.Submitted) -> None:
        scenario = self._scenario()
        if scenario is None:
            self.notify("choose the scenario to export first, or press escape", severity="warning")
            return
        raw_score = self.query_one("#export-min-score", Input).value.strip()
        min_score = _number(raw_score)
        if raw_score and min_score is None:
            self.notify(f"min score must be a number, not {raw_score!r}", severity="warning")
            return
        typed = self.query_one("#export-file", Input).value.strip()
        if not typed:
            self.notify("name the file to write, or press escape", severity="warning")
            return
        path = Path(typed).expanduser().absolute()
        problem = unwritable(path)
        if problem:
            self.notify(problem, title="cannot export there", severity="error")
            return
        self.dismiss(ExportChoice(scenario, self._format(), path, min_score))


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
