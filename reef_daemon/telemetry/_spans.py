"""Spans from what reef stored: an exchange (GenAI semantic conventions), a report, a training or harness step.

Each is built finished, as the SDK's `ReadableSpan` that span processors and exporters take: what reef exports has
already happened, so nothing is gained by starting and ending a live span, which costs several times as much. Ids
come from reef's own, so exporting a record again yields the same span."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from reef_contract import JUDGE_SCENARIO, MESSAGES_ROUTE, RecordRow, StepRow
from reef_daemon.records import ExchangeFacts

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_SCOPE = InstrumentationScope("reef")


def derived_id(key: str, size: int) -> int:
    """A valid (non-zero) id of `size` bytes from a hash of `key`."""
    value = int.from_bytes(hashlib.sha256(key.encode()).digest()[:size], "big")
    return value or 1


def span_context(key: str, *, remote: bool = False) -> SpanContext:
    """The span context reef gives the span of `key` (a receipt, or a step's key): each is the root of a trace of its
    own, which reports and steps link to."""
    return SpanContext(derived_id(f"trace:{key}", 16), derived_id(f"span:{key}", 8), remote, _SAMPLED)


def record_context(receipt: str) -> SpanContext:
    """The span context of the record `receipt` (an exchange or a report) as a link sees it."""
    return span_context(receipt, remote=True)


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


@dataclass(frozen=True)
class SpanMaker:
    """Builds reef's spans for one resource (the service) and one instrumentation scope ("reef")."""

    resource: Resource
    scope: InstrumentationScope = _SCOPE

    def _span(
        self, name: str, key: str, kind: SpanKind, attributes: dict[str, Any], start_s: float,
        end_s: float | None = None, links: list[Link] | None = None, status: Status | None = None,
    ) -> ReadableSpan:  # fmt: skip
        return ReadableSpan(
            name,
            context=span_context(key),
            resource=self.resource,
            attributes=attributes,
            links=links or (),
            kind=kind,
            instrumentation_scope=self.scope,
            status=status or Status(StatusCode.UNSET),
            start_time=_ns(start_s),
            end_time=_ns(start_s if end_s is None else end_s),
        )

    def exchange(
        self, row: RecordRow, facts: ExchangeFacts, cost: float | None, content: dict[str, str] | None
    ) -> ReadableSpan:
        """One span for an exchange, from its start to its end as the record says."""
        attributes = exchange_attributes(row, facts, cost, content)
        name = f"{attributes['gen_ai.operation.name']} {attributes.get('gen_ai.request.model', '')}".strip()
        start = row["created_at"]
        status_code = row["status"]
        status = None
        if facts.error is not None or (status_code is not None and status_code >= 400):
            attributes["error.type"] = str(status_code) if status_code is not None else "_OTHER"
            status = Status(StatusCode.ERROR, facts.error)
        end = start + (row["duration_ms"] or 0) / 1000
        return self._span(name, row["id"], SpanKind.CLIENT, attributes, start, end, status=status)

    def report(self, row: RecordRow, references: list[str], score: float | None) -> ReadableSpan:
        """A report as a span of its own, linked to every exchange it scores (a step that consumes the report links
        to this span in turn)."""
        attributes: dict[str, Any] = {
            "reef.receipt": row["id"],
            "reef.scenario": row["scenario"],
            "reef.report.source": row["source"] or "person",
            "reef.report.references": references,
        }
        if score is not None:
            attributes["reef.report.score"] = score
        links = [Link(record_context(receipt)) for receipt in references]
        name = f"reef.report {attributes['reef.report.source']}"
        return self._span(name, row["id"], SpanKind.INTERNAL, attributes, row["created_at"], links=links)

    def request(self, row: RecordRow) -> ReadableSpan:
        """A person's change request as a span of its own, so the harness step that consumes it links to something."""
        attributes = {"reef.receipt": row["id"], "reef.scenario": row["scenario"]}
        return self._span("reef.request", row["id"], SpanKind.INTERNAL, attributes, row["created_at"])

    def step(self, step: StepRow) -> ReadableSpan:
        """A training or harness step as a span of its own trace, linked to the exchanges it consumed."""
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
        links = [Link(record_context(receipt)) for receipt in step["consumed"]]
        key = f"step:{step['scenario']}:{step['step']}"
        return self._span(
            f"reef.step {step['operation']}", key, SpanKind.INTERNAL, attributes, step["created_at"] or 0.0,
            links=links,
        )  # fmt: skip
