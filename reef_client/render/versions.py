"""A scenario's versions in the words of the JSON, for `reef versions` and `reef-<agent> versions` alike.

Each row is a step of the scenario's recipe: the `operation` that made it (creation: the first release; training:
a step, which for a harness is a change request; promote; rollback), its `result` (selected, rejected, skipped,
pending) and the `release` it published, if any. Versions count what was made: a selected or pending step is the
next vN; a rejected or skipped step publishes nothing, takes no number and shows `-` as its version.
"""

from __future__ import annotations

from reef_client import ReleaseRow
from reef_client.render.formats import MISSING

HEADERS = ("version", "release", "operation", "result", "status")
REQUEST_WIDTH = 60


def version_cells(row: ReleaseRow, *, installed: bool) -> tuple[str, str, str, str, str]:
    """The row's cells under HEADERS: version, short release id, operation, result, status marks."""
    marks = [
        mark
        for mark, on in (("installed", installed), ("current", row.get("current")), ("pending", row.get("pending")))
        if on
    ]
    if row.get("promoted_as"):
        marks.append(f"promoted as {row['promoted_as']}")
    release = (row["release_id"] or "")[:8] or MISSING
    version = row["version"] or MISSING
    return version, release, str(row["operation"]), str(row["result"]), ", ".join(marks)


def request_text(row: ReleaseRow) -> str:
    """The text of the change request the row answered, cut to REQUEST_WIDTH; empty when none."""
    request = row.get("request")
    text = (request["text"] or "") if request else ""
    return text if len(text) <= REQUEST_WIDTH else text[: REQUEST_WIDTH - 1] + "…"
