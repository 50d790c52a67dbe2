"""OpenTelemetry export of exchanges, reports and steps (GenAI semantic conventions), and what exchanges cost."""

from reef_daemon.telemetry._export import TelemetryExport, capture_asked, start_telemetry
from reef_daemon.telemetry.prices import Price, PriceTable, PriceTableError

__all__ = ["Price", "PriceTable", "PriceTableError", "TelemetryExport", "capture_asked", "start_telemetry"]
