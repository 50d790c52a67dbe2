"""The export process: reads span orders from the daemon, one JSON array per line on stdin, builds spans with the
OpenTelemetry SDK and sends them over OTLP/HTTP in batches; writes what became of them, one JSON object per line on
stdout. Building and encoding a span costs about what proxying its exchange does, so it runs here, in a process of
its own, not under the daemon's interpreter lock.

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

from opentelemetry.trace import Tracer

from reef_daemon.records import ExchangeFacts
from reef_daemon.telemetry._provider import Exporting, build_provider
from reef_daemon.telemetry._spans import export_exchange, export_report, export_request, export_step

COUNTS_EVERY_S = 0.1  # the shortest gap between two lines of counts


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


def export_order(exporting: Exporting, tracer: Tracer, order: list[Any]) -> None:
    """One span from one order, as `TelemetryExport` wrote it."""
    kind, *fields = order
    if kind == "exchange":
        row, facts, cost, content = fields
        export_exchange(tracer, exporting.ids, row, ExchangeFacts(*facts), cost, content)
    elif kind == "report":
        row, references, score = fields
        export_report(tracer, exporting.ids, row, references, score)
    elif kind == "request":
        export_request(tracer, exporting.ids, fields[0])
    elif kind == "step":
        export_step(tracer, exporting.ids, fields[0])
    else:
        raise ValueError(f"unknown span order {kind!r}")


def run(endpoint: str | None, lines: IO[bytes], out: IO[str]) -> None:
    exporting = build_provider(endpoint, os.environ)
    tracer = exporting.provider.get_tracer("reef")
    counts = CountsOut(exporting, out)
    exporting.counts.listener = counts.say
    for line in lines:
        if not exporting.queue.admit():
            continue  # counted as dropped
        try:
            export_order(exporting, tracer, json.loads(line))
        except Exception as error:  # one order that cannot become a span must not end the export
            print(f"telemetry: could not export an order: {error!r}", file=sys.stderr, flush=True)
    exporting.provider.shutdown()  # sends what is queued, bounded by OTEL_BSP_EXPORT_TIMEOUT
    counts.say(final=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", help="the collector's base URL (the OTEL_* variables otherwise)")
    args = parser.parse_args(argv)
    run(args.endpoint, sys.stdin.buffer, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
