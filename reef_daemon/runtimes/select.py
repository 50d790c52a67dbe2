"""Choosing the runtime from the settings."""

from __future__ import annotations

from reef_daemon.runtimes.base import Runtime
from reef_daemon.runtimes.http import HttpRuntime
from reef_daemon.settings import Settings, SettingsError


def build_runtime(settings: Settings) -> Runtime:
    if settings.inference.upstream_url:
        return HttpRuntime(settings)
    raise SettingsError(
        "no model to serve: set --inference.upstream-url (or REEF_UPSTREAM_URL) to an OpenAI- or "
        "Anthropic-compatible endpoint"
    )
