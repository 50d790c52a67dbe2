"""OpenTelemetry export of exchanges, reports and steps (GenAI semantic conventions), and what exchanges cost."""

from reef_daemon.telemetry._export import TelemetryExport, build_telemetry, capture_asked
from reef_daemon.telemetry._provider import TelemetryError
from reef_daemon.telemetry.prices import Price, PriceTable, PriceTableError

__all__ = [
    "Price",
    "PriceTable",
    "PriceTableError",
    "TelemetryError",
    "TelemetryExport",
    "build_telemetry",
    "capture_asked",
]
