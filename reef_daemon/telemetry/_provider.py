"""The export pipeline: built only when an OTLP endpoint is configured (OTEL_EXPORTER_OTLP_ENDPOINT,
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or telemetry.otlp-endpoint) and OTEL_SDK_DISABLED is not true. The SDK reads the
standard OTEL_* variables itself (headers, timeout, compression, OTEL_BSP_* batching); reef adds counts of what
could not be exported."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from reef_daemon.telemetry._spans import SpanMaker

DEFAULT_MAX_QUEUE = 2048  # the SDK's OTEL_BSP_MAX_QUEUE_SIZE default


@dataclass
class ExportCounts:
    """What happened to the spans handed to the exporter, counted across threads."""

    exported: int = 0
    failed: int = 0  # spans in batches the collector did not take (down, refusing, timed out)
    dropped: int = 0  # spans never sent: the queue in front of the exporter was full
    listener: Callable[[], None] | None = None  # told after every change
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)
        if self.listener is not None:
            self.listener()


class _CountingExporter(SpanExporter):
    """The OTLP exporter, counting what it sent and what failed."""

    def __init__(self, inner: SpanExporter, counts: ExportCounts) -> None:
        self._inner = inner
        self._counts = counts

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self._inner.export(spans)
        except Exception:  # a transport error is a failed batch, never the export thread's end
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self._counts.add(exported=len(spans))
        else:
            self._counts.add(failed=len(spans))
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class _HashedOnce(Resource):
    """The service's resource, hashed once: the OTLP encoder groups spans by resource, hashing each span's, and the
    SDK's hash serialises every attribute to JSON each time (~7 µs a span)."""

    def __init__(self, resource: Resource) -> None:
        super().__init__(resource.attributes, resource.schema_url)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash


class QueueWatch:
    """Counts the spans the batch processor would drop: it holds at most `max_queue` spans not yet handed to the
    exporter, and drops one for each span ended beyond that."""

    def __init__(self, counts: ExportCounts, max_queue: int) -> None:
        self._counts = counts
        self._max_queue = max_queue
        self.ended = 0

    def admit(self) -> bool:
        """Whether one more ended span fits; a span that does not is counted as dropped and not ended."""
        waiting = self.ended - self._counts.exported - self._counts.failed
        if waiting >= self._max_queue:
            self._counts.add(dropped=1)
            return False
        self.ended += 1
        return True


@dataclass
class Exporting:
    """A running export pipeline: the SDK's batch processor in front of the OTLP exporter, and what reef keeps beside
    it."""

    processor: BatchSpanProcessor
    spans: SpanMaker
    counts: ExportCounts
    queue: QueueWatch


def build_export(endpoint_setting: str | None, environ: Mapping[str, str]) -> Exporting:
    """A pipeline exporting over OTLP/HTTP in batches; `endpoint_setting` (a base URL) beats the environment's
    (whose protocol `switch.check_protocol` has checked)."""
    counts = ExportCounts()
    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; with neither it names an unknown service.
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "reef"}))
    endpoint = None if endpoint_setting is None else endpoint_setting.rstrip("/") + "/v1/traces"
    processor = BatchSpanProcessor(_CountingExporter(OTLPSpanExporter(endpoint=endpoint), counts))
    max_queue = int(environ.get("OTEL_BSP_MAX_QUEUE_SIZE") or DEFAULT_MAX_QUEUE)
    return Exporting(processor, SpanMaker(_HashedOnce(resource)), counts, QueueWatch(counts, max_queue))
