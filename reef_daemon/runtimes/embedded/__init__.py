"""The `embedded` runtime: SmolLM2-135M-Instruct (or another local model) served by reef itself, through the torch
engine (in this process) or the sglang engine (an SGLang server)."""

from reef_daemon.runtimes.embedded.runtime import EmbeddedRuntime

__all__ = ["EmbeddedRuntime"]
