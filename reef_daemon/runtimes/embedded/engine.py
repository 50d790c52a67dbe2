"""What the embedded runtime's API layer needs from an engine that generates tokens.

The API layer (chat completions, Responses, Messages; streaming; records) parses a request, renders the prompt ids
with the model's own chat template, and hands a `Job` to the engine. The engine fills the job: one token at a time,
each with its log-prob and the weight version that produced it, finishing it by the shared `StopRules`. Engines:
`torch` (the model in this process, `torch_engine.py`) and `sglang` (an SGLang server, `sglang/engine.py`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from reef_daemon.runtimes.embedded.job import Job


class Engine(ABC):
    """Generates the tokens of submitted jobs and takes new weights between tokens."""

    name: ClassVar[str]

    @abstractmethod
    async def start(self) -> None:
        """Load or reach the model; after this the properties below answer."""

    @abstractmethod
    async def close(self) -> None:
        """Stop generating; jobs still running end as cancelled or failed."""

    @property
    @abstractmethod
    def model_name(self) -> str:
        """The name answers carry in their `model` field."""

    @property
    @abstractmethod
    def tokenizer(self) -> Any:
        """The model's transformers tokenizer, with its chat template."""

    @property
    @abstractmethod
    def context_length(self) -> int:
        """The most positions (prompt and answer) the model reads."""

    @property
    @abstractmethod
    def version(self) -> str:
        """The weight version serving now, `<incarnation>:<sequence>`."""

    @property
    @abstractmethod
    def weights_dir(self) -> Path:
        """The Hugging Face folder holding the serving weights (what a trainer starts from)."""

    @abstractmethod
    def submit(self, job: Job) -> None:
        """Start generating the job's answer; events arrive on `job.events` on the job's loop."""

    @abstractmethod
    async def swap_weights(self, state: Mapping[str, Any]) -> str:
        """Serve a full or partial state dict from the next token on, pausing generation between tokens and never
        refusing a request; returns the new version. On failure the old weights keep serving and the error says
        why (KeyError, ValueError or RuntimeError, as `WeightSwappable.swap_weights`)."""

    @property
    def failure(self) -> str | None:
        """Why the started engine can generate no more (its generation thread stopped); None while it can."""
        return None

    @property
    def serves_adapters(self) -> bool:
        """Whether `swap_adapter` works here."""
        return False

    async def swap_adapter(self, scenario: str, state: Mapping[str, Any], scale: float) -> str:
        """Serve `scenario` with a new LoRA adapter (PEFT-named lora_A / lora_B tensors, output scale alpha / r)
        from its next token on, pausing no other scenario; returns the adapter's version. ValueError for tensors
        that do not fit the model; RuntimeError from an engine that serves no adapters."""
        raise RuntimeError(f"the {self.name} engine serves no LoRA adapters")

    def adapter_version(self, scenario: str) -> str:
        """The version serving `scenario`: its adapter's, or the base weights' for a scenario without one."""
        return self.version

    @abstractmethod
    def identity(self) -> dict[str, str]:
        """`model` and `source` (and `url` for a server), known before `start`."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """What `reef status` shows of the engine once started (parameters, speed, URL, ...)."""
