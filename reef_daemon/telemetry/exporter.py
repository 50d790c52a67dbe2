"""The export process: reads span orders from the daemon, one JSON array per line on stdin, builds spans with the
OpenTelemetry SDK and sends them over OTLP/HTTP in batches; writes what became of them, one JSON object per line on
stdout. Encoding a span costs a good part of what proxying its exchange does, so it runs here, in a process of its
own, not under the daemon's interpreter lock.

    python -m reef_daemon.telemetry.exporter [--endpoint URL] (the OTEL_* variables as the SDK reads them)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import IO, Any

import orjson

from reef_daemon.records import ExchangeFacts
from reef_daemon.telemetry._provider import Exporting, build_export

COUNTS_EVERY_S = 0.1  # the shortest gap between two lines of counts
# Export yields the CPU to the proxy and its clients: on a busy machine spans wait (and past the queue are counted as
# dropped) rather than answers. The lowest priority, not none: a machine kept busy by other work still exports.
NICENESS = 19


class CountsOut:
    """Writes the counts to the daemon when they changed, at most every COUNTS_EVERY_S (and once at the end)."""

    def __init__(self, exporting: Exporting, out: IO[str]) -> None:
        self._exporting = exporting
        self._out = out
        self._lock = threading.Lock()
        self._said: tuple[int, int, int] | None = None
        self._at = 0.0

    def say(self, *, final: bool = False) -> None:
        counts = self._exporting.counts
        now = (counts.exported, counts.failed, counts.dropped)
        with self._lock:
            if now == self._said or (not final and time.monotonic() - self._at < COUNTS_EVERY_S):
                return
            self._said, self._at = now, time.monotonic()
            line = json.dumps({"exported": now[0], "failed": now[1], "dropped": now[2]})
            self._out.write(line + "\n")
            self._out.flush()


def export_order(exporting: Exporting, order: list[Any]) -> None:
    """One span from one order, as `TelemetryExport` wrote it, handed to the batch processor."""
    kind, *fields = order
    spans = exporting.spans
    if kind == "exchange":
        row, facts, cost, content = fields
        span = spans.exchange(row, ExchangeFacts(*facts), cost, content)
    elif kind == "report":
        row, references, score = fields
        span = spans.report(row, references, score)
    elif kind == "request":
        span = spans.request(fields[0])
    elif kind == "step":
        span = spans.step(fields[0])
    else:
        raise ValueError(f"unknown span order {kind!r}")
    exporting.processor.on_end(span)


def run(endpoint: str | None, lines: IO[bytes], out: IO[str]) -> None:
    exporting = build_export(endpoint, os.environ)
    counts = CountsOut(exporting, out)
    exporting.counts.listener = counts.say
    for line in lines:
        if not exporting.queue.admit():
            continue  # counted as dropped
        try:
            export_order(exporting, orjson.loads(line))
        except Exception as error:  # one order that cannot become a span must not end the export
            print(f"telemetry: could not export an order: {error!r}", file=sys.stderr, flush=True)
    exporting.processor.shutdown()  # type: ignore[no-untyped-call]  # sends what is queued, bounded by OTEL_BSP_EXPORT_TIMEOUT
    counts.say(final=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", help="the collector's base URL (the OTEL_* variables otherwise)")
    args = parser.parse_args(argv)
    os.nice(NICENESS)  # Windows has no niceness; reef runs on Linux and macOS
    run(args.endpoint, sys.stdin.buffer, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
