"""Choosing the embedded runtime's engine from `embedded.engine`: torch (this process) or sglang (a server)."""

from __future__ import annotations

from reef_daemon.runtimes.embedded.engine import Engine
from reef_daemon.settings import Settings


def build_engine(settings: Settings) -> Engine:
    """The configured engine, not started. SettingsError, saying what to install or set, when it cannot run here."""
    if settings.embedded.engine == "sglang":
        from reef_daemon.runtimes.embedded.sglang.engine import SglangEngine

        return SglangEngine(settings)
    from reef_daemon.runtimes.embedded.loading import resolve_source
    from reef_daemon.runtimes.embedded.torch_engine import TorchEngine

    int8 = settings.embedded.decode_weights == "int8"
    return TorchEngine(resolve_source(settings.inference.model_path), settings.reef.state_dir, int8=int8)
