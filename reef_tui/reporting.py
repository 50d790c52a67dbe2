"""Sending a score or feedback for one record from any screen, in a worker, with the outcome as a notification."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from textual.screen import Screen

from reef_client import ReefClientError

if TYPE_CHECKING:
    from reef_tui.app import ReefApp


def send_report(
    screen: Screen[Any],
    scenario: str,
    record_id: str,
    *,
    score: float | None = None,
    feedback: str | None = None,
    done: Callable[[float | None], None],
) -> None:
    """Report on `record_id`; on success `done(score)` runs on the app's thread; a refusal is shown with its reason."""
    app = cast("ReefApp", screen.app)

    def work() -> None:
        try:
            app.client.report(scenario, [record_id], score=score, feedback=feedback)
        except ReefClientError as exc:
            app.call_from_thread(app.notify, exc.message, title="report refused", severity="error")
            return
        app.call_from_thread(done, score)

    screen.run_worker(work, thread=True, group="report")
