"""Spans from what reef stored: an exchange (GenAI semantic conventions), a report, a training or harness step.
Ids come from reef's own (`ChosenIds`), so exporting a record again yields the same span."""

from __future__ import annotations

import json
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

from reef_daemon.contract import JUDGE_SCENARIO, MESSAGES_ROUTE, RecordRow, StepRow, StoredRecord
from reef_daemon.telemetry._provider import ChosenIds, derived_id
from reef_daemon.telemetry.prices import PriceTable


def record_context(receipt: str) -> SpanContext:
    """The span context of the record `receipt` (an exchange or a report), as its span was exported: each record is
    the root of a trace of its own, which reports and steps link to."""
    return SpanContext(
        derived_id(f"trace:{receipt}", 16), derived_id(f"span:{receipt}", 8), True, TraceFlags(TraceFlags.SAMPLED)
    )


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def exchange_attributes(record: StoredRecord, prices: PriceTable, capture: bool) -> dict[str, Any]:
    """The GenAI and reef attributes of one exchange; the messages only when `capture`."""
    route = record["route"] or ""
    request = record["request"] if isinstance(record["request"], dict) else {}
    answer = record["answer"]
    usage = record["usage"]
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",  # reef serves chat completions, responses and messages only
        # The API reef was called with: the best knowledge of the provider behind it.
        "gen_ai.provider.name": "anthropic" if route == MESSAGES_ROUTE else "openai",
        "reef.receipt": record["id"],
        "reef.scenario": record["scenario"],
        "reef.judge": record["scenario"] == JUDGE_SCENARIO,
    }
    optional: dict[str, Any] = {
        "gen_ai.request.model": request.get("model") if isinstance(request.get("model"), str) else None,
        "gen_ai.response.model": (answer["model"] if answer is not None else None) or record["model"],
        "gen_ai.usage.input_tokens": usage.get("input_tokens"),
        "gen_ai.usage.output_tokens": usage.get("output_tokens"),
        "gen_ai.conversation.id": record["tags"].get("session"),
        "reef.session": record["tags"].get("session"),
        "reef.judge.source": record["tags"].get("judge") if record["scenario"] == JUDGE_SCENARIO else None,
        "reef.version": record["release"],
        "reef.release_id": record.get("release_id"),
        "http.response.status_code": record["status"],
    }
    if answer is not None and answer["finish_reason"]:
        optional["gen_ai.response.finish_reasons"] = [answer["finish_reason"]]
    if request.get("stream") is True:
        optional["gen_ai.request.stream"] = True
        ttft = record["timings"]["ttft_ms"]
        optional["gen_ai.response.time_to_first_chunk"] = None if ttft is None else ttft / 1000
    cost = prices.record_cost(record)
    optional["reef.cost_usd"] = cost
    optional["gen_ai.usage.cost"] = cost
    if capture:
        optional.update(_content(request, answer))
    attributes.update({key: value for key, value in optional.items() if value is not None})
    return attributes


def _content(request: dict[str, Any], answer: Any) -> dict[str, str | None]:
    """The conversation as JSON strings (span attributes cannot hold structures in Python's SDK)."""
    messages = request.get("messages", request.get("input"))
    output = None
    if answer is not None:
        parts = [
            {"type": "text", "content": part["text"]} if part["type"] == "text" else {"type": part["type"]}
            for part in answer["parts"]
        ]
        output = [{"role": "assistant", "parts": parts, "finish_reason": answer["finish_reason"] or "stop"}]
    system = request.get("system") if isinstance(request.get("system"), str) else None
    return {
        "gen_ai.input.messages": json.dumps(messages, ensure_ascii=False) if messages is not None else None,
        "gen_ai.output.messages": json.dumps(output, ensure_ascii=False) if output is not None else None,
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": system}]) if system else None,
    }


def export_exchange(tracer: Tracer, ids: ChosenIds, record: StoredRecord, prices: PriceTable, capture: bool) -> None:
    """One span for an exchange, from its start to its end as the record says."""
    attributes = exchange_attributes(record, prices, capture)
    name = f"{attributes['gen_ai.operation.name']} {attributes.get('gen_ai.request.model', '')}".strip()
    start = record["created_at"]
    duration_s = (record["duration_ms"] or 0) / 1000
    ids.choose(record["id"], record["id"])
    span = tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes, start_time=_ns(start))
    status = record["status"]
    if record["error"] is not None or (status is not None and status >= 400):
        span.set_attribute("error.type", str(status) if status is not None else "_OTHER")
        span.set_status(Status(StatusCode.ERROR, record["error"]))
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
