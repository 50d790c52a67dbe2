"""The `embedded` runtime: SmolLM2-135M-Instruct (or another local model) served on the CPU with torch."""

from reef_daemon.runtimes.embedded.runtime import EmbeddedRuntime

__all__ = ["EmbeddedRuntime"]
