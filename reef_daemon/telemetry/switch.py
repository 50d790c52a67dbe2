"""Whether reef exports at all, read without loading the OpenTelemetry SDK: the daemon never imports it; the export
process (`telemetry.exporter`) does, and it starts only when an endpoint is configured."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reef_daemon.telemetry._export import TelemetryExport
    from reef_daemon.telemetry.prices import PriceTable

ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
PROTOCOL_ENVS = ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")


class TelemetryError(Exception):
    """An OTEL_* setting reef cannot honour."""


CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# The values of CAPTURE_ENV that put content on spans: the legacy `true` and util-genai's span modes.
_CAPTURE_VALUES = ("true", "span_only", "span_and_event")


def capture_asked(setting: str, environ: Mapping[str, str]) -> bool:
    """Whether prompts and answers go on spans: telemetry.capture-content on, or the conventions' variable."""
    return setting == "on" or environ.get(CAPTURE_ENV, "").strip().lower() in _CAPTURE_VALUES


def wanted(endpoint_setting: str | None, environ: Mapping[str, str]) -> bool:
    """Whether to export at all: an endpoint is named and the SDK is not disabled."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return endpoint_setting is not None or any(environ.get(name) for name in ENDPOINT_ENVS)


def check_protocol(environ: Mapping[str, str]) -> None:
    """Raises TelemetryError when the environment asks for an OTLP protocol other than HTTP with protobuf."""
    for name in PROTOCOL_ENVS:
        protocol = environ.get(name, "").strip()
        if protocol and protocol != "http/protobuf":
            raise TelemetryError(
                f"{name}={protocol}: reef exports OTLP over HTTP (http/protobuf) only; unset it or set http/protobuf"
                " and point the endpoint at the collector's HTTP port (4318)"
            )


def build_telemetry(
    endpoint: str | None, capture_setting: str, prices: PriceTable, environ: Mapping[str, str] | None = None
) -> TelemetryExport | None:
    """The export, when an OTLP endpoint is configured and the SDK is not disabled; None otherwise.

    Raises:
        TelemetryError: an OTEL_* variable asks for what reef cannot do.
    """
    environ = os.environ if environ is None else environ
    if not wanted(endpoint, environ):
        return None
    check_protocol(environ)
    from reef_daemon.telemetry._export import TelemetryExport

    return TelemetryExport(endpoint, prices, capture_asked(capture_setting, environ))
