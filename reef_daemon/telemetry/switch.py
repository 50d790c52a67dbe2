"""Whether reef exports at all, read without loading the OpenTelemetry SDK: it (and its OTLP exporter) is imported
only when an endpoint is configured, so a daemon that exports nothing pays neither its memory nor its start."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reef_daemon.telemetry._export import TelemetryExport
    from reef_daemon.telemetry.prices import PriceTable

ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


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
    from reef_daemon.telemetry._export import TelemetryExport  # the SDK, only now it is wanted
    from reef_daemon.telemetry._provider import build_provider

    return TelemetryExport(build_provider(endpoint, environ), prices, capture_asked(capture_setting, environ))
