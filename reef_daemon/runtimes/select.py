"""Choosing the runtime from the settings: the upstream when one is given, else the embedded model."""

from __future__ import annotations

from reef_daemon.runtimes.base import Runtime
from reef_daemon.runtimes.http import HttpRuntime
from reef_daemon.settings import Settings


def build_runtime(settings: Settings) -> Runtime:
    if settings.inference.upstream_url:
        return HttpRuntime(settings)
    # Imported here, after checking the extra is installed, so that fronting an upstream never loads torch.
    from reef_daemon.runtimes.embedded.loading import check_installed

    check_installed()
    from reef_daemon.runtimes.embedded import EmbeddedRuntime

    return EmbeddedRuntime(settings)
