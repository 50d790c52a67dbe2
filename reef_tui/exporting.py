"""Exporting records to a file from the TUI: the daemon's export streamed to the file in a worker (the screen stays
live), then a notification of how many lines were written and where, or why none were."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from textual.screen import Screen

from reef_client import ReefClientError, nothing_to_export, whole_file

if TYPE_CHECKING:
    from reef_tui.app import ReefApp


@dataclass(frozen=True)
class ExportChoice:
    """What the export dialog asked for."""

    scenario: str
    format: str
    path: Path
    min_score: float | None = None

    def lines_named(self, count: int) -> str:
        """`12 records` (or `3 pairs` for preference, whose lines each pair two records)."""
        noun = "pair" if self.format == "preference" else "record"
        return f"{count} {noun}{'s' if count != 1 else ''}"


def export_records(screen: Screen[Any], choice: ExportChoice) -> None:
    """Stream `choice` from the daemon into its file in a thread worker; the outcome is shown as a notification."""
    app = cast("ReefApp", screen.app)
    where = str(choice.path)

    def work() -> None:
        written = 0
        try:
            with whole_file(choice.path, keep_empty=False) as sink, app.client.export(
                choice.scenario, format=choice.format, min_score=choice.min_score
            ) as stream:  # fmt: skip
                for line in stream.lines:
                    sink.write(line + "\n")
                    written += 1
        except ReefClientError as exc:
            app.call_from_thread(app.notify, exc.message, title="export failed", severity="error")
            return
        except OSError as exc:
            reason = exc.strerror or str(exc)
            app.call_from_thread(app.notify, f"cannot write {where}: {reason}", title="export failed", severity="error")
            return
        if written == 0:
            sentence = f"{nothing_to_export(choice.scenario, choice.format)}; no file written"
            app.call_from_thread(app.notify, sentence, title="nothing exported", severity="warning")
        else:
            app.call_from_thread(app.notify, f"exported {choice.lines_named(written)} to {where}", title="exported")

    app.notify(f"exporting {choice.scenario} as {choice.format} to {where} …", timeout=3)
    screen.run_worker(work, thread=True, group="export")
