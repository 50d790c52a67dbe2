"""OpenTelemetry export of exchanges, reports and steps (GenAI semantic conventions), and what exchanges cost."""

from reef_daemon.telemetry.prices import Price, PriceTable, PriceTableError
from reef_daemon.telemetry.switch import TelemetryError, build_telemetry, capture_asked

__all__ = [
    "Price",
    "PriceTable",
    "PriceTableError",
    "TelemetryError",
    "build_telemetry",
    "capture_asked",
]
