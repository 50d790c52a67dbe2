"""Where a derived report (one no person gave) came from, in one line: the turn it was read from and why, as
`reef show`, `reef records` and the TUI say it. A next-turn report's evidence names the turn (`next_record`),
what the user said there (`next_message`) and the verdict; its feedback is the reason."""

from __future__ import annotations

from reef_client import StoredRecord
from reef_contract import PERSON_SOURCE

QUOTED_CHARS = 80  # of the next message, in one line


def derived_origin(report: StoredRecord) -> str | None:
    """`read from turn <receipt> ("<next message>"), corrected: <reason>` for a next-turn report; the source and
    its reason for another derived one; None for a person's report."""
    source = report.get("source")
    if not source or source == PERSON_SOURCE:
        return None
    feedback = report.get("feedback")
    reason = feedback if isinstance(feedback, str) else None
    turn = turn_read(report)
    where = f"read from {turn}" if turn else f"derived by {source}"
    return f"{where}: {reason}" if reason else where


def turn_read(report: StoredRecord) -> str | None:
    """`turn <receipt> ("<next message>"), corrected`: the turn a next-turn report was read from, what the user
    said there and the verdict; None for a report read from no turn."""
    evidence = report.get("evidence") or {}
    turn = evidence.get("next_record")
    if not turn:
        return None
    said = _one_line(evidence.get("next_message"))
    verdict = evidence.get("verdict")
    return f"turn {turn}" + (f' ("{said}")' if said else "") + (f", {verdict}" if verdict else "")


def _one_line(text: object) -> str:
    if not isinstance(text, str):
        return ""
    flat = " ".join(text.split())
    return flat if len(flat) <= QUOTED_CHARS else flat[: QUOTED_CHARS - 1] + "…"
