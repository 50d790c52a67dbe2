"""`reef show`: one record made readable — what was asked, what came back, timings, tokens, serving version,
and the reports that reference it."""

from __future__ import annotations

import json

from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from reef_client import JudgedRecord, RecordDetail, StoredRecord
from reef_client.render import formats
from reef_client.render.conversation import Part, Turn, answer_turns, body_turns, request_turns, tool_names
from reef_client.render.derived import derived_origin, turn_read
from reef_contract import Usage

# What `reef show` says of token counts an API did not report (a stream asked without usage, say).
NOT_REPORTED = "not reported"
_ROLE_STYLE = {"system": "magenta", "user": "cyan", "assistant": "green", "tool": "yellow"}


# How `reef show` says to score an unscored record; {id} is its receipt.
SCORE_HINT = "not scored yet: reef score {id} <score>"


def record_view(record: RecordDetail, *, how_to_score: str | None = SCORE_HINT) -> RenderableType:
    """Everything `reef show` prints for one record. `how_to_score` is the line under an unscored inference record
    (a screen with keys of its own says those; None for none)."""
    parts: list[RenderableType] = [_facts(record)]
    if record.get("type") == "inference":
        route = str(record.get("route") or "")
        parts += _section("request", request_turns(route, record.get("request")))
        streamed = isinstance(record.get("response"), dict) and record["response"].get("stream") is True
        title = "answer (streamed, assembled from its events)" if streamed else "answer"
        parts += _section(title, _answer(record, streamed))
    elif record.get("type") == "report":
        parts.append(_report_body(record))
    reports = record.get("reports") or []
    if reports:
        parts += [Text("reports", style="bold"), _reports_table(reports)]
    elif record.get("type") == "inference" and how_to_score is not None:
        parts.append(Text(how_to_score.format(id=record.get("id")), style="dim"))
    return Group(*parts)


def _answer(record: StoredRecord, streamed: bool) -> list[Turn]:
    """The answer the daemon assembled when it recorded the exchange; else a successful body as it is."""
    answer = record.get("answer")
    if answer is not None:
        return answer_turns(answer)
    if streamed or (record.get("status") or 0) >= 400:
        return []
    return body_turns(record.get("response"))


def _facts(record: RecordDetail) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    timings = record.get("timings") or {}
    add = grid.add_row
    add("receipt", str(record.get("id")))
    add("scenario", str(record.get("scenario")))
    add("time", formats.timestamp(record.get("created_at")))
    training = training_fate(record)
    if record.get("type") != "inference":
        add("type", str(record.get("type")))
        if record.get("type") == "report":
            add("source", str(record.get("source") or "person"))
            origin = derived_origin(record)
            if origin:
                add("derived", origin)
        if training:
            add("training", training)
        return grid
    add("route", str(record.get("route")))
    add("model", str(record.get("model") or formats.MISSING))
    add("status", _status(record))
    first, total = formats.latency(timings.get("ttft_ms")), formats.latency(timings.get("duration_ms"))
    add(
        "timings",
        f"first byte {first}, total {total}, reef overhead {_ms(timings.get('overhead_ms'))} before its commit",
    )
    add("tokens", _tokens(record.get("usage") or {}))
    cost = record.get("cost_usd")
    add("cost", "no price for this model (telemetry.prices)" if cost is None else f"${cost:.6f}")
    add("serving", _serving(record))
    tools = tool_names(record.get("request"))
    if tools:
        add("tools", ", ".join(tools))
    for name, value in sorted((record.get("tags") or {}).items()):
        add(f"tag {name}", str(value))
    add("score", _score_with_source(record))
    scored_by = scoring_origin(record)
    if scored_by:
        add("derived", scored_by)
    if training:
        add("training", training)
    return grid


def _score_with_source(record: StoredRecord) -> str:
    """The record's score, saying where it came from when no person gave it."""
    shown = formats.score(record.get("score"))
    source = record.get("source")
    if record.get("score") is None or not source or source == "person":
        return shown
    return f"{shown} (derived: {source})"


def scoring_origin(record: RecordDetail) -> str | None:
    """Where a derived score on an inference record came from: the turn its report was read from and why."""
    source = record.get("source")
    if record.get("score") is None or not source or source == "person":
        return None
    report = next((each for each in record.get("reports") or [] if each.get("source") == source), None)
    return derived_origin(report) if report is not None else None


def training_fate(record: JudgedRecord) -> str | None:
    """What the recipe did with a record: the step that trained on it, or why it never will."""
    if record.get("consumed_by_step") is not None:
        return f"trained on in step {record['consumed_by_step']}"
    if record.get("ineligible"):
        return f"not trained on: {record['ineligible']}"
    return None


def _status(record: StoredRecord) -> Text:
    status = record.get("status")
    text = Text(str(status), style="red" if (status or 0) >= 400 else "green")
    if record.get("complete") is False:
        text.append(" incomplete", style="red")
    if record.get("error"):
        text.append(f" ({record['error']})", style="red")
    return text


def _serving(record: StoredRecord) -> str:
    release = record.get("release") or "(none)"
    tokens = record.get("tokens")
    versions = tokens.get("versions") if tokens else None
    if isinstance(versions, list) and versions:
        distinct = sorted({str(v) for v in versions})
        return f"release {release}, weights {', '.join(distinct)}"
    return f"release {release}"


def _tokens(usage: Usage) -> str:
    inputs, outputs = usage.get("input_tokens"), usage.get("output_tokens")
    if inputs is None and outputs is None:
        return NOT_REPORTED
    return f"{NOT_REPORTED if inputs is None else inputs} in, {NOT_REPORTED if outputs is None else outputs} out"


def _ms(value: float | None) -> str:
    return formats.MISSING if value is None else f"{value:.2f} ms"


def _section(title: str, turns: list[Turn]) -> list[RenderableType]:
    if not turns:
        return []
    return [Text(title, style="bold underline"), *(_turn(turn) for turn in turns)]


def _turn(turn: Turn) -> Panel:
    body = Group(*(_part(part) for part in turn.parts)) if turn.parts else Text("(empty)", style="dim")
    style = _ROLE_STYLE.get(turn.role, "white")
    return Panel(body, title=turn.role, title_align="left", border_style=style)


def _part(part: Part) -> RenderableType:
    if part.kind == "tool_call":
        return Panel(Syntax(part.text, "json", word_wrap=True), title=f"tool call: {part.name or '?'}",
                     title_align="left", border_style="yellow")  # fmt: skip
    if part.kind == "tool_result":
        title = f"tool result{f' for {part.name}' if part.name else ''}"
        return Panel(Text(part.text), title=title, title_align="left", border_style="yellow")
    if part.kind == "thinking":
        return Text(part.text, style="dim italic")
    return Markdown(part.text)


def _report_body(record: StoredRecord) -> RenderableType:
    fields: dict[str, object] = dict(record)
    keys = ("score", "source", "feedback", "references", "evidence", "metadata")
    body = {key: fields[key] for key in keys if fields.get(key) is not None}
    return Syntax(json.dumps(body, indent=2, ensure_ascii=False), "json", word_wrap=True)


def _reports_table(reports: list[JudgedRecord]) -> Table:
    fates = [training_fate(report) for report in reports]
    turns = [turn_read(report) for report in reports]
    columns = ["report", "time", "score", "source", "feedback"]
    columns += (["read from"] if any(turns) else []) + (["training"] if any(fates) else [])
    table = Table()
    for column in columns:
        table.add_column(column)
    for report, turn, fate in zip(reports, turns, fates, strict=True):
        feedback = report.get("feedback")
        shown = feedback if isinstance(feedback, str) else json.dumps(feedback) if feedback is not None else ""
        cells = [
            str(report.get("id")),
            formats.clock(report.get("created_at")),
            formats.score(report.get("score")),
            str(report.get("source") or "person"),
            shown,
        ]
        cells += [turn or ""] if any(turns) else []
        table.add_row(*cells, *([fate or ""] if any(fates) else []))
    return table
