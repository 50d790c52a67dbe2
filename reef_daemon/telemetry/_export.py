"""Export off the request path and off the daemon's interpreter: a subscriber to the events bus turns committed
records, reports, change requests and steps into span orders (small JSON lines) and writes them, a run at a time, to
the export process (`telemetry.exporter`), which builds the spans and sends them in batches. A collector that is down
or hangs fills that process's queue; what does not fit, there or in the pipe to it, is dropped and counted, and no
answer waits for any of it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from typing import Any

import orjson

from reef_contract import EventName, RecordEvent, ReportEvent, RequestEvent, StepEvent, TelemetryState
from reef_daemon.events import EventBus, Subscription
from reef_daemon.records import ExchangeFacts
from reef_daemon.store import Event, Store
from reef_daemon.telemetry._content import conversation_attributes
from reef_daemon.telemetry.prices import PriceTable

log = logging.getLogger("reef")

_EXPORTED_EVENTS: tuple[EventName, ...] = ("record", "report", "request", "step")
RUN_ORDERS = 512  # orders written to the export process at once, at most
GATHER_S = 0.05  # how long an order may wait for others to go with it: the process wakes once per run, not per order
# Bytes waiting for the pipe to the export process (~2,500 orders, as many as the SDK's own queue holds); orders beyond
# are dropped. Kept small: with a 16 MiB backlog the export process fell behind at saturation and dropped 9 spans in
# 10; with this bound it kept up (bench/README.md, "OpenTelemetry export on vs off").
PIPE_LIMIT = 1024 * 1024
STOP_WAIT_S = 40.0  # the export process's last sends are bounded by OTEL_BSP_EXPORT_TIMEOUT (30 s by default)


class TelemetryExport:
    """Spans for what the store commits, exported in batches by a process of their own while the daemon runs."""

    def __init__(self, endpoint: str | None, prices: PriceTable, capture: bool) -> None:
        self._endpoint = endpoint
        self._prices = prices
        self._capture = capture
        self._counts = {"exported": 0, "failed": 0, "dropped": 0}  # as the export process last said
        self._dropped = 0  # orders this side never handed over: the bus or the pipe was full, or the process gone
        self._handed = 0  # orders written to the export process
        self._process: asyncio.subprocess.Process | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._orders: list[bytes] = []  # waiting to be handed over
        self._handing: asyncio.TimerHandle | None = None

    def start(self, bus: EventBus, store: Store) -> None:
        self._tasks.append(asyncio.create_task(self._run(bus, store)))

    async def stop(self) -> None:
        """Stop taking events, let the export process send what it holds, and wait for it (bounded)."""
        for task in self._tasks[:1]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        process = self._process
        if process is None:
            return
        self._hand_over()
        if process.stdin is not None:
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), STOP_WAIT_S)
        except TimeoutError:
            log.warning("telemetry: the export process did not finish its last sends in %.0f s; ended", STOP_WAIT_S)
            process.kill()
            await process.wait()
        for task in self._tasks[1:]:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def state(self) -> TelemetryState:
        return {
            "exporting": True,
            "exported": self._counts["exported"],
            "failed": self._counts["failed"],
            "dropped": self._counts["dropped"] + self._dropped,
        }

    async def _run(self, bus: EventBus, store: Store) -> None:
        endpoint = [] if self._endpoint is None else ["--endpoint", self._endpoint]
        self._process = process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "reef_daemon.telemetry.exporter", *endpoint,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        self._tasks.append(asyncio.create_task(self._read_counts(process)))
        while True:
            subscription = bus.subscribe(types=_EXPORTED_EVENTS)
            try:
                await self._follow(subscription, store)
            finally:
                subscription.close()
            self._dropped += subscription.lost

    async def _follow(self, subscription: Subscription, store: Store) -> None:
        while (event := await subscription.next()) is not None:
            if self._taking() is None:
                self._dropped += 1  # it would be dropped at the hand-over: not worth building
                continue
            try:
                order = await self._order(event, store)
            except Exception:  # one record that cannot become an order must not end the export
                log.exception("telemetry: could not export event %s", event.sequence)
                continue
            if order is None:
                continue
            self._orders.append(orjson.dumps(order) + b"\n")
            if len(self._orders) >= RUN_ORDERS:
                self._hand_over()
            elif self._handing is None:
                self._handing = asyncio.get_running_loop().call_later(GATHER_S, self._hand_over)

    def _hand_over(self) -> None:
        """Write the waiting orders to the export process as one run, or count them dropped when it is gone or
        behind."""
        if self._handing is not None:
            self._handing.cancel()
            self._handing = None
        orders, self._orders = self._orders, []
        if not orders:
            return
        pipe = self._taking()
        if pipe is None:
            self._dropped += len(orders)
            return
        pipe.write(b"".join(orders))
        self._handed += len(orders)

    def _taking(self) -> asyncio.StreamWriter | None:
        """The pipe to the export process while it takes orders; None while it is gone or behind (the pipe holds
        more than PIPE_LIMIT), when orders are dropped."""
        process = self._process
        pipe = None if process is None else process.stdin
        if process is None or pipe is None or pipe.is_closing() or process.returncode is not None:
            return None
        return None if pipe.transport.get_write_buffer_size() > PIPE_LIMIT else pipe

    async def _order(self, event: Event, store: Store) -> list[Any] | None:
        """What the export process needs to build the event's span; None for an event that makes none."""
        if event.type == "record":
            stored: RecordEvent = event.data  # type: ignore[assignment]
            row, facts, content = stored["record"], event.facts, None
            if facts is None or self._capture:  # from another process, or the messages wanted: read it back
                record = await store.records.get(row["id"])
                facts = ExchangeFacts.from_stored(record)
                content = conversation_attributes(record) if self._capture else None
            cost = self._prices.cost_usd(row["model"] or facts.requested_model, row["usage"])
            return ["exchange", row, facts.as_list(), cost, content]
        if event.type == "report":
            report: ReportEvent = event.data  # type: ignore[assignment]
            return ["report", report["record"], report["references"], report["score"]]
        if event.type == "request":
            filed: RequestEvent = event.data  # type: ignore[assignment]
            return None if filed["record"] is None else ["request", filed["record"]]  # None: one moving on
        if event.type == "step":
            step: StepEvent = event.data  # type: ignore[assignment]
            return ["step", step["step"]]
        return None

    async def _read_counts(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        while line := await process.stdout.readline():
            with contextlib.suppress(ValueError):
                said = json.loads(line)
                self._counts = {name: int(said[name]) for name in self._counts}
        code = await process.wait()
        # What it was handed and never said it did (it died with them queued, or before it saw them) is dropped.
        self._dropped += max(0, self._handed - sum(self._counts.values()))
        if code != 0:
            log.error("telemetry: the export process ended (exit %s); nothing is exported from now on", code)
