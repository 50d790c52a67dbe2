"""Sending a score or feedback for one record from any screen, in a worker, with the outcome as a notification."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from textual.screen import Screen

from reef_client import ReefClientError
from reef_tui.receipts import abbreviated

if TYPE_CHECKING:
    from reef_tui.app import ReefApp


def send_report(
    screen: Screen[Any],
    scenario: str,
    record_id: str,
    *,
    score: float | None = None,
    feedback: str | None = None,
    replaces: float | None = None,
    done: Callable[[float | None], None],
) -> None:
    """Report on `record_id`; on success `done(score)` runs on the app's thread; a refusal is shown with its reason.
    `replaces` is the score the record had: a new score replacing it says so."""
    app = cast("ReefApp", screen.app)

    def work() -> None:
        try:
            ack = app.client.report(scenario, [record_id], score=score, feedback=feedback)
        except ReefClientError as exc:
            app.call_from_thread(app.notify, exc.message, title="report refused", severity="error")
            return
        if score is not None and replaces is not None and ack["created"]:
            said = f"{abbreviated(record_id)} had a score of {replaces:g}; {score:g} replaces it"
            app.call_from_thread(app.notify, said, title="score replaced", timeout=5)
        app.call_from_thread(done, score)

    screen.run_worker(work, thread=True, group="report")
