"""The preview pane under the records list on a tall terminal: the selected record's last user message and its
answer, following the cursor, so reading and scoring need no Enter; for a score or report no person gave, the turn
it was read from and why."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.panel import Panel
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from reef_client import RecordDetail
from reef_client.render import formats
from reef_client.render.conversation import Part, Turn, answer_turns, request_turns
from reef_client.render.derived import derived_origin
from reef_client.render.record import scoring_origin

EXCERPT = 600  # characters of a tool call or result shown; the detail screen shows them whole


def preview_view(record: RecordDetail) -> RenderableType:
    """The receipt, scenario, model and score on one line, then what was asked and what came back."""
    facts = Text.assemble(
        ("receipt ", "bold"), str(record.get("id")), "  ",
        ("scenario ", "bold"), str(record.get("scenario")), "  ",
        ("model ", "bold"), str(record.get("model") or formats.MISSING), "  ",
        ("score ", "bold"), formats.score(record.get("score")),
    )  # fmt: skip
    if record.get("type") != "inference":
        origin = derived_origin(record)
        said = [Text(f"{record.get('source')}: {origin}")] if origin else []
        return Group(facts, *said, Text(f"a {record.get('type')} record: enter shows it", style="dim"))
    parts: list[RenderableType] = [facts]
    scored_by = scoring_origin(record)
    if scored_by:
        parts.append(Text(f"score from {record.get('source')}: {scored_by}"))
    asked = [turn for turn in request_turns(str(record.get("route") or ""), record.get("request")) if _said(turn)]
    if asked:
        parts.append(_panel("asked", asked[-1], "cyan"))
    answer = record.get("answer")
    if answer is not None:
        parts.extend(_panel("answer", turn, "green") for turn in answer_turns(answer))
    elif record.get("error") or (record.get("status") or 0) >= 400:
        parts.append(Text(f"no answer: status {record.get('status')} {record.get('error') or ''}", style="red"))
    return Group(*parts)


def _said(turn: Turn) -> bool:
    """A user turn with words in it (not one that only carries tool results)."""
    return turn.role == "user" and any(part.kind == "text" and part.text.strip() for part in turn.parts)


def _panel(title: str, turn: Turn, style: str) -> Panel:
    body = Group(*(_part(part) for part in turn.parts)) if turn.parts else Text("(empty)", style="dim")
    return Panel(body, title=title, title_align="left", border_style=style)


def _part(part: Part) -> RenderableType:
    if part.kind == "text":
        return Markdown(part.text)
    label = {"tool_call": f"tool call {part.name or '?'}", "tool_result": "tool result", "thinking": "thinking"}
    text = part.text if len(part.text) <= EXCERPT else part.text[:EXCERPT] + "…"
    return Text.assemble((f"{label[part.kind]}: ", "bold yellow"), (text, "dim"))


class RecordPreview(VerticalScroll):
    """Shows one record's exchange; says so while it loads or when there is none."""

    shown: str | None = None
    """The id of the record on show, if one is."""

    def compose(self) -> ComposeResult:
        yield Static(id="record-preview-body")

    def show(self, record: RecordDetail) -> None:
        self.shown = str(record.get("id"))
        self.query_one("#record-preview-body", Static).update(preview_view(record))
        self.scroll_home(animate=False)

    def say(self, sentence: str, *, error: bool = False) -> None:
        self.shown = None
        self.query_one("#record-preview-body", Static).update(Text(sentence, style="red" if error else "dim"))
