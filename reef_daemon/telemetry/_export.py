"""Export off the request path: a subscriber to the events bus turns committed records, reports, change requests
and steps into spans, which the SDK's batch processor sends from its own thread. A collector that is down or hangs
fills that processor's queue; what does not fit is dropped and counted, and no answer waits for any of it."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from reef_daemon.contract import EventName, RecordEvent, ReportEvent, RequestEvent, StepEvent, TelemetryState
from reef_daemon.events import EventBus, Subscription
from reef_daemon.store import Event, Store
from reef_daemon.telemetry._provider import Exporting
from reef_daemon.telemetry._spans import export_exchange, export_report, export_request, export_step
from reef_daemon.telemetry.prices import PriceTable

log = logging.getLogger("reef")

_EXPORTED_EVENTS: tuple[EventName, ...] = ("record", "report", "request", "step")


class TelemetryExport:
    """Spans for what the store commits, exported in batches while the daemon runs."""

    def __init__(self, exporting: Exporting, prices: PriceTable, capture: bool) -> None:
        self._exporting = exporting
        self._tracer = exporting.provider.get_tracer("reef")
        self._prices = prices
        self._capture = capture
        self._lost = 0  # events the bus dropped because this subscriber fell behind
        self._task: asyncio.Task[None] | None = None

    def start(self, bus: EventBus, store: Store) -> None:
        self._task = asyncio.create_task(self._run(bus, store))

    async def stop(self) -> None:
        """Stop taking events and send what is queued (bounded by OTEL_BSP_EXPORT_TIMEOUT), off the loop."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await asyncio.to_thread(self._exporting.provider.shutdown)

    def state(self) -> TelemetryState:
        counts = self._exporting.counts
        return {
            "exporting": True,
            "exported": counts.exported,
            "failed": counts.failed,
            "dropped": counts.dropped + self._lost,
        }

    async def _run(self, bus: EventBus, store: Store) -> None:
        while True:
            subscription = bus.subscribe(types=_EXPORTED_EVENTS)
            try:
                await self._follow(subscription, store)
            finally:
                subscription.close()
            self._lost += subscription.lost

    async def _follow(self, subscription: Subscription, store: Store) -> None:
        while (event := await subscription.next()) is not None:
            if event.type == "request" and event.data.get("record") is None:
                continue  # a change request moving on: no new record, no span
            if not self._exporting.queue.admit():
                continue
            try:
                await self._export(event, store)
            except Exception:  # one record that cannot become a span must not end the export
                log.exception("telemetry: could not export event %s", event.sequence)

    async def _export(self, event: Event, store: Store) -> None:
        ids = self._exporting.ids
        if event.type == "record":
            stored: RecordEvent = event.data  # type: ignore[assignment]
            record = await store.records.get(stored["record"]["id"])
            export_exchange(self._tracer, ids, record, self._prices, self._capture)
        elif event.type == "report":
            report: ReportEvent = event.data  # type: ignore[assignment]
            export_report(self._tracer, ids, report["record"], report["references"], report["score"])
        elif event.type == "request":
            filed: RequestEvent = event.data  # type: ignore[assignment]
            if filed["record"] is not None:
                export_request(self._tracer, ids, filed["record"])
        elif event.type == "step":
            step: StepEvent = event.data  # type: ignore[assignment]
            export_step(self._tracer, ids, step["step"])
