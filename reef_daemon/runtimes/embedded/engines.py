"""Choosing the embedded runtime's engine from `embedded.engine`: torch (this process) or sglang (a server)."""

from __future__ import annotations

from typing import cast

from reef_daemon.runtimes.embedded.engine import Engine
from reef_daemon.settings import Settings


def build_engine(settings: Settings) -> Engine:
    """The configured engine, not started. SettingsError, saying what to install or set, when it cannot run here."""
    if settings.embedded.engine == "sglang":
        from reef_daemon.runtimes.embedded.sglang.engine import SglangEngine

        return SglangEngine(settings)
    from reef_daemon.runtimes.embedded.loading import resolve_source
    from reef_daemon.runtimes.embedded.precision import DecodeWeights
    from reef_daemon.runtimes.embedded.torch_engine import TorchEngine

    weights = cast(DecodeWeights, settings.embedded.decode_weights)  # one of its kind's choices
    return TorchEngine(resolve_source(settings.inference.model_path), settings.reef.state_dir, weights=weights)
