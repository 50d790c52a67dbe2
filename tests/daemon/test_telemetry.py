"""OpenTelemetry export: a local OTLP/HTTP receiver gets a GenAI span per exchange, reports and steps linked to
their records, prompts only when content capture is asked for; a collector that is down or hangs costs no answer."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from typing import Any

import pytest
from rich.console import Console

from reef_cli.render.status import status_view
from tests.support import counting_recipe
from tests.support.app_servers import AppServers, url_of
from tests.support.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.support.processes import children
from tests.support.reef_testing import CHAT, Reef, StartReef
from tests.support.waiting import eventually

RECIPE = "tests.support.counting_recipe:CountingRecipe"


@pytest.fixture(autouse=True)
def quick_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches leave every 50 ms, and an export waits at most a second, so a test does not wait on the SDK's
    defaults; the endpoint is reef's setting, never one in this machine's environment."""
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1")
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)


async def receiving(app_servers: AppServers, receiver: OtlpReceiver) -> str:
    return url_of(await app_servers.serve(receiver.app()))


async def receipt(reef: Reef, body: dict[str, Any] = CHAT, headers: dict[str, str] | None = None) -> str:
    response = await reef.post("/v1/chat/completions", body, headers=headers)
    assert response.status == 200, await response.text()
    await response.read()
    return response.headers["x-reef-agent-record-id"]


async def span_of(receiver: OtlpReceiver, record_id: str) -> ReceivedSpan:
    def find() -> ReceivedSpan | None:
        return next((s for s in receiver.spans if s.attributes.get("reef.receipt") == record_id), None)

    found = await eventually(find, 30, f"the span of {record_id}")
    assert found is not None
    return found


async def test_a_proxied_chat_is_one_genai_span_without_its_words(
    start_reef: StartReef, app_servers: AppServers
) -> None:
    receiver = OtlpReceiver()
    reef = await start_reef(telemetry__otlp_endpoint=await receiving(app_servers, receiver))
    record_id = await receipt(reef, headers={"x-reef-tag-session": "s-42"})

    span = await span_of(receiver, record_id)
    stored = await reef.record(record_id)
    assert span.name == "chat fake-model"
    assert span.resource["service.name"] == "reef"
    attributes = span.attributes
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.request.model"] == "fake-model"
    assert attributes["gen_ai.usage.input_tokens"] == stored["usage"]["input_tokens"]
    assert attributes["gen_ai.usage.output_tokens"] == stored["usage"]["output_tokens"]
    assert attributes["gen_ai.response.finish_reasons"] == [stored["answer"]["finish_reason"]]
    assert attributes["reef.scenario"] == stored["scenario"]
    assert attributes["gen_ai.conversation.id"] == "s-42"
    assert "reef.cost_usd" not in attributes  # fake-model has no price, which is not a price of 0
    assert span.start_ns == int(stored["created_at"] * 1e9)
    assert not any("capital" in str(value) for value in attributes.values())

    # The export process says what it sent after the collector took it: awaited, not assumed.
    said = await eventually(lambda: _telemetry(reef), 30, "the span counted", satisfied=lambda t: t["exported"] >= 1)
    assert said["exporting"] is True


async def test_content_capture_puts_the_conversation_on_the_span(
    start_reef: StartReef, app_servers: AppServers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    receiver = OtlpReceiver()
    reef = await start_reef(telemetry__otlp_endpoint=await receiving(app_servers, receiver))
    span = await span_of(receiver, await receipt(reef))
    assert "capital of France" in span.attributes["gen_ai.input.messages"]
    assert '"role": "assistant"' in span.attributes["gen_ai.output.messages"]


async def test_a_stream_reads_the_same_on_its_span_whether_its_words_are_captured_or_not(
    start_reef: StartReef, app_servers: AppServers
) -> None:
    """Without capture the span is built from what the daemon knew as it stored the record; with capture, from the
    record read back. Both say the same of the exchange."""
    spans = []
    for capture in ("off", "on"):
        receiver = OtlpReceiver()
        reef = await start_reef(
            telemetry__otlp_endpoint=await receiving(app_servers, receiver), telemetry__capture_content=capture
        )
        streamed = {**CHAT, "stream": True}
        response = await reef.post("/v1/chat/completions", streamed, headers={"x-reef-tag-session": "s"})
        [record_id] = re.findall(r'"agent_record_id":\s*"([0-9a-f]{32})"', await response.text())
        spans.append(await span_of(receiver, record_id))
    bare, captured = (
        {k: v for k, v in span.attributes.items() if k not in ("reef.receipt", "gen_ai.response.time_to_first_chunk")}
        for span in spans
    )
    assert spans[0].attributes["gen_ai.request.stream"] is True
    assert spans[0].attributes["gen_ai.response.time_to_first_chunk"] > 0
    assert "gen_ai.response.time_to_first_chunk" in spans[1].attributes
    assert {k: v for k, v in captured.items() if k not in ("gen_ai.input.messages", "gen_ai.output.messages")} == bare
    assert "capital of France" in captured["gen_ai.input.messages"]


async def test_a_priced_model_exports_its_cost(start_reef: StartReef, app_servers: AppServers, tmp_path: Any) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text('{"fake-model": {"input": 1000000, "output": 2000000}}')
    receiver = OtlpReceiver()
    reef = await start_reef(
        telemetry__otlp_endpoint=await receiving(app_servers, receiver), telemetry__prices=str(prices)
    )
    record_id = await receipt(reef)
    span = await span_of(receiver, record_id)
    stored = await reef.record(record_id)
    cost = stored["usage"]["input_tokens"] + 2 * stored["usage"]["output_tokens"]
    assert span.attributes["reef.cost_usd"] == stored["cost_usd"] == cost
    await receipt(reef, {**CHAT, "model": "unpriced-model"})
    status = await (await reef.get("/reef/status")).json()
    assert "spend" not in status  # a scan of the store: not in the status clients poll
    costs = await (await reef.get("/reef/spend")).json()
    assert costs["scenarios"][stored["scenario"]] == {"usd": cost, "priced": 1, "unpriced": 1}
    console = Console(width=200, record=True)
    console.print(status_view(status, reef.url, costs))
    shown = console.export_text()
    assert f"${cost:.4f} + 1 unpriced" in shown
    assert "OTLP:" in shown and "spans exported" in shown


async def test_reports_and_steps_link_to_their_records(start_reef: StartReef, app_servers: AppServers) -> None:
    counting_recipe.STEPS_TAKEN.clear()
    receiver = OtlpReceiver()
    reef = await start_reef(recipe=RECIPE, telemetry__otlp_endpoint=await receiving(app_servers, receiver))
    first, second = await receipt(reef), await receipt(reef)
    for record_id, score in ((first, 1), (second, 0)):
        response = await reef.post("/reef/report", {"score": score, "references": [record_id]})
        assert response.status == 200, await response.text()

    exchange = await span_of(receiver, first)
    step = await eventually(lambda: receiver.named("reef.step"), 60, "the step's span")
    reports = [s for s in receiver.named("reef.report") if (exchange.trace_id, exchange.span_id) in s.links]
    assert len(reports) == 1 and reports[0].attributes["reef.report.source"] == "person"
    assert reports[0].attributes["reef.report.score"] == 1
    (consumed,) = counting_recipe.STEPS_TAKEN
    report_spans = {s.attributes["reef.receipt"]: (s.trace_id, s.span_id) for s in receiver.named("reef.report")}
    await eventually(lambda: set(consumed) <= set(report_spans), 30, "the consumed reports' spans")
    assert set(step[0].links) == {report_spans[record_id] for record_id in consumed}
    assert step[0].attributes["reef.version"] == "v1"


@pytest.mark.parametrize("hang", [False, True], ids=["down", "hangs"])
async def test_a_collector_down_or_hanging_costs_no_answer(
    start_reef: StartReef, app_servers: AppServers, hang: bool
) -> None:
    if hang:
        receiver = OtlpReceiver(hang=True)
        endpoint = await receiving(app_servers, receiver)
    else:
        server = await app_servers.serve(OtlpReceiver().app())
        endpoint = url_of(server)
        await server.close()  # nothing listens there any more
    reef = await start_reef(telemetry__otlp_endpoint=endpoint)
    if hang:
        app_servers.close_later(receiver.release)

    answers = await asyncio.gather(*(receipt(reef) for _ in range(20)))
    assert len(set(answers)) == 20
    status = await eventually(
        lambda: _telemetry(reef), 30, "export failures counted", satisfied=lambda t: t["failed"] > 0
    )
    assert status["exported"] == 0


async def test_an_export_process_that_dies_costs_no_answer_and_its_spans_are_counted(
    start_reef: StartReef, app_servers: AppServers
) -> None:
    receiver = OtlpReceiver()
    reef = await start_reef(telemetry__otlp_endpoint=await receiving(app_servers, receiver))
    await span_of(receiver, await receipt(reef))
    [exporter] = [pid for pid, argv in children().items() if b"reef_daemon.telemetry.exporter" in argv]
    os.kill(exporter, signal.SIGKILL)
    await eventually(lambda: exporter not in children(), 30, "the export process gone")

    answers = await asyncio.gather(*(receipt(reef) for _ in range(5)))
    assert len(set(answers)) == 5
    await eventually(lambda: _telemetry(reef), 30, "the spans counted", satisfied=lambda t: t["dropped"] >= 5)


async def _telemetry(reef: Reef) -> dict[str, Any]:
    status = await (await reef.get("/reef/status")).json()
    return dict(status["telemetry"])


async def test_nothing_is_exported_without_an_endpoint(reef: Reef) -> None:
    await receipt(reef)
    status = await (await reef.get("/reef/status")).json()
    assert status["telemetry"] is None
