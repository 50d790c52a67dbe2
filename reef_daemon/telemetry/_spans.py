"""Spans from what reef stored: an exchange (GenAI semantic conventions), a report, a training or harness step.
Ids come from reef's own (`ChosenIds`), so exporting a record again yields the same span."""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import (
    Link,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
)

from reef_contract import JUDGE_SCENARIO, MESSAGES_ROUTE, RecordRow, StepRow
from reef_daemon.records import ExchangeFacts
from reef_daemon.telemetry._provider import ChosenIds, derived_id


def record_context(receipt: str) -> SpanContext:
    """The span context of the record `receipt` (an exchange or a report), as its span was exported: each record is
    the root of a trace of its own, which reports and steps link to."""
    return SpanContext(
        derived_id(f"trace:{receipt}", 16), derived_id(f"span:{receipt}", 8), True, TraceFlags(TraceFlags.SAMPLED)
    )


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def exchange_attributes(
    row: RecordRow, facts: ExchangeFacts, cost: float | None, content: dict[str, str] | None
) -> dict[str, Any]:
    """The GenAI and reef attributes of one exchange; its messages only when their `content` is given."""
    tags = facts.tags
    judged = row["scenario"] == JUDGE_SCENARIO
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",  # reef serves chat completions, responses and messages only
        # The API reef was called with: the best knowledge of the provider behind it.
        "gen_ai.provider.name": "anthropic" if row["route"] == MESSAGES_ROUTE else "openai",
        "reef.receipt": row["id"],
        "reef.scenario": row["scenario"],  # reef-judge: a call of the next-turn judge
    }
    usage = row["usage"]
    optional: dict[str, Any] = {
        "gen_ai.request.model": facts.requested_model,
        "gen_ai.response.model": row["model"],
        "gen_ai.usage.input_tokens": usage.get("input_tokens"),
        "gen_ai.usage.output_tokens": usage.get("output_tokens"),
        "gen_ai.conversation.id": tags.get("session"),  # the session tag
        "reef.judge.source": tags.get("judge") if judged else None,
        "reef.version": row["release"],
        "http.response.status_code": row["status"],
        "reef.cost_usd": cost,
    }
    if facts.finish_reason:
        optional["gen_ai.response.finish_reasons"] = [facts.finish_reason]
    if facts.stream:
        optional["gen_ai.request.stream"] = True
        optional["gen_ai.response.time_to_first_chunk"] = None if facts.ttft_ms is None else facts.ttft_ms / 1000
    if content is not None:
        optional.update(content)
    attributes.update({key: value for key, value in optional.items() if value is not None})
    return attributes


def export_exchange(
    tracer: Tracer, ids: ChosenIds, row: RecordRow, facts: ExchangeFacts, cost: float | None,
    content: dict[str, str] | None,
) -> None:  # fmt: skip
    """One span for an exchange, from its start to its end as the record says."""
    attributes = exchange_attributes(row, facts, cost, content)
    name = f"{attributes['gen_ai.operation.name']} {attributes.get('gen_ai.request.model', '')}".strip()
    start = row["created_at"]
    duration_s = (row["duration_ms"] or 0) / 1000
    ids.choose(row["id"], row["id"])
    span = tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes, start_time=_ns(start))
    status = row["status"]
    if facts.error is not None or (status is not None and status >= 400):
        span.set_attribute("error.type", str(status) if status is not None else "_OTHER")
        span.set_status(Status(StatusCode.ERROR, facts.error))
    span.end(end_time=_ns(start + duration_s))


def export_report(tracer: Tracer, ids: ChosenIds, row: RecordRow, references: list[str], score: float | None) -> None:
    """A report as a span of its own, linked to every exchange it scores (a step that consumes the report links to
    this span in turn)."""
    attributes: dict[str, Any] = {
        "reef.receipt": row["id"],
        "reef.scenario": row["scenario"],
        "reef.report.source": row["source"] or "person",
        "reef.report.references": references,
    }
    if score is not None:
        attributes["reef.report.score"] = score
    ids.choose(row["id"], row["id"])
    span = tracer.start_span(
        f"reef.report {attributes['reef.report.source']}",
        kind=SpanKind.INTERNAL,
        attributes=attributes,
        links=[Link(record_context(receipt)) for receipt in references],
        start_time=_ns(row["created_at"]),
    )
    span.end(end_time=_ns(row["created_at"]))


def export_request(tracer: Tracer, ids: ChosenIds, row: RecordRow) -> None:
    """A person's change request as a span of its own, so the harness step that consumes it links to something."""
    ids.choose(row["id"], row["id"])
    span = tracer.start_span(
        "reef.request",
        kind=SpanKind.INTERNAL,
        attributes={"reef.receipt": row["id"], "reef.scenario": row["scenario"]},
        start_time=_ns(row["created_at"]),
    )
    span.end(end_time=_ns(row["created_at"]))


def export_step(tracer: Tracer, ids: ChosenIds, step: StepRow) -> None:
    """A training or harness step as a span of its own trace, linked to the exchanges it consumed."""
    key = f"step:{step['scenario']}:{step['step']}"
    attributes: dict[str, Any] = {
        "reef.scenario": step["scenario"],
        "reef.step": step["step"],
        "reef.step.operation": step["operation"],
        "reef.step.result": step["result"],
        "reef.step.consumed": len(step["consumed"]),
    }
    for name, value in (("reef.version", step["version"]), ("reef.release_id", step["release_id"])):
        if value is not None:
            attributes[name] = value
    created = step["created_at"] or 0.0
    ids.choose(key, key)
    span = tracer.start_span(
        f"reef.step {step['operation']}",
        kind=SpanKind.INTERNAL,
        attributes=attributes,
        links=[Link(record_context(receipt)) for receipt in step["consumed"]],
        start_time=_ns(created),
    )
    span.end(end_time=_ns(created))
