"""Where one change request stands: its text, state, live activity, and once settled its result, version and
how-to-use text."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from reef_client import RequestProgress
from reef_client.render import formats

_RESULT_STYLE = {"selected": "green", "rejected": "red", "skipped": "yellow", "pending": "cyan"}


def request_view(progress: RequestProgress) -> RenderableType:
    """The panel for one `GET /reef/requests/{id}` answer."""
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    facts.add_row("request", str(progress.get("id")))
    facts.add_row("filed", formats.timestamp(progress.get("created_at")))
    facts.add_row("state", str(progress.get("state")))
    if progress.get("result"):
        result = str(progress["result"])
        facts.add_row("result", Text(result, style=_RESULT_STYLE.get(result, "")))
        facts.add_row("version", str(progress.get("version") or formats.MISSING))
    if progress.get("reason"):
        facts.add_row("why", str(progress["reason"]))
    parts: list[RenderableType] = [facts, Text(""), Text(str(progress.get("text") or ""), style="italic")]
    activity = progress.get("activity") or []
    if activity:
        parts += [Text("\nactivity", style="bold")]
        parts += [Text(f"· {_line(entry)}") for entry in activity]
    if progress.get("how_to_use"):
        parts += [Text("\nhow to use", style="bold"), Markdown(str(progress["how_to_use"]))]
    if progress.get("design"):
        parts += [Text("\ndesign", style="bold"), Markdown(str(progress["design"]))]
    return Group(*parts)


def _line(entry: Any) -> str:
    return str(entry.get("text")) if isinstance(entry, dict) else str(entry)


class RequestView(Static):
    """Shows one request's progress, or a sentence when there is none to show."""

    shown: str | None = None
    """The id of the request on show, if one is."""

    def show(self, progress: RequestProgress) -> None:
        self.shown = str(progress.get("id"))
        self.update(request_view(progress))

    def say(self, sentence: str, *, error: bool = False) -> None:
        self.shown = None
        self.update(Text(sentence, style="red" if error else "dim"))
