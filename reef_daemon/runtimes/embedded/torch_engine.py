"""The `torch` engine: the model in this process, decoded in batches on the generation thread (`worker.py`)."""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from reef_contract import ServedAdapters
from reef_daemon.runtimes.embedded.adapters import LoraAdapter, lora_layers
from reef_daemon.runtimes.embedded.decode_kernel import decoding_method
from reef_daemon.runtimes.embedded.engine import Engine
from reef_daemon.runtimes.embedded.job import Job
from reef_daemon.runtimes.embedded.loading import LoadedModel, ModelSource, load_model
from reef_daemon.runtimes.embedded.precision import DecodeWeights, decode_copies
from reef_daemon.runtimes.embedded.stopping import end_ids
from reef_daemon.runtimes.embedded.worker import GenerationWorker

log = logging.getLogger("reef.embedded")


class TorchEngine(Engine):
    name: ClassVar[str] = "torch"

    def __init__(self, source: ModelSource, state_dir: Path, *, weights: DecodeWeights = "auto") -> None:
        self._source = source
        self._state_dir = state_dir
        self._weights = weights  # the copies decoding reads (embedded.decode-weights)
        self._loaded: LoadedModel | None = None
        self._worker: GenerationWorker | None = None
        self._load_s: float | None = None

    async def start(self) -> None:
        began = time.perf_counter()
        self._loaded = await asyncio.to_thread(load_model, self._source, self._state_dir, self._weights)
        self._load_s = time.perf_counter() - began
        loaded = self._loaded
        # Adapters beyond the resident cap spill into the state directory, whose files outlive no run.
        spill = self._state_dir / "adapters-spilled"
        shutil.rmtree(spill, ignore_errors=True)
        self._worker = GenerationWorker(loaded, end_ids(loaded.tokenizer, loaded.model.generation_config), spill)
        self._worker.start()
        log.info(
            "embedded model %s loaded in %.1f s (%s)",
            loaded.name, self._load_s, "dequantised and cached" if loaded.cold else "from cache",
        )  # fmt: skip

    async def close(self) -> None:
        if self._worker is not None:
            await asyncio.to_thread(self._worker.close)
            self._worker = None

    @property
    def model_name(self) -> str:
        return self._running()[0].name

    @property
    def tokenizer(self) -> Any:
        return self._running()[0].tokenizer

    @property
    def context_length(self) -> int:
        return self._running()[0].context_length

    @property
    def version(self) -> str:
        return str(self._running()[1].version)

    @property
    def weights_dir(self) -> Path:
        """The fp32 Hugging Face folder the serving weights were loaded from (the safetensors cache for a GGUF)."""
        return self._running()[0].weights_dir

    @property
    def failure(self) -> str | None:
        return self._worker.failure if self._worker is not None else None

    def submit(self, job: Job) -> None:
        self._running()[1].submit(job)

    async def swap_weights(self, state: Mapping[str, Any]) -> str:
        return await asyncio.wrap_future(self._running()[1].swap(state))

    @property
    def serves_adapters(self) -> bool:
        return True

    async def swap_adapter(self, scenario: str, state: Mapping[str, Any], scale: float) -> str:
        adapter = LoraAdapter(scenario, "", scale, lora_layers(state))
        return await asyncio.wrap_future(self._running()[1].swap(adapter))

    def adapter_version(self, scenario: str) -> str:
        return self._running()[1].version_of(scenario)

    def identity(self) -> dict[str, str]:
        return {"model": self._source.name, "source": str(self._source.path)}

    def describe(self) -> dict[str, Any]:
        loaded, worker = self._running()
        speed = worker.tokens_per_second()
        return {
            "parameters": loaded.parameters,
            "tokens_per_second": round(speed, 1) if speed is not None else None,
            "peak_batch": worker.peak_batch,
            "prompt_tokens_read": worker.prompt_tokens_read,
            "prompt_tokens_reused": worker.prompt_tokens_reused,
            "decoding": decoding_method(decode_copies(loaded.model)),
            "context_length": loaded.context_length,
            "weights": str(loaded.weights_dir),
            "load_s": round(self._load_s or 0.0, 3),
            **({"adapters": adapters} if (adapters := self._adapters(worker)) else {}),
        }

    @staticmethod
    def _adapters(worker: GenerationWorker) -> ServedAdapters | None:
        """The LoRA adapters serving, for `reef status`; None while there are none."""
        bank = worker.adapters
        if not bank.scenarios:
            return None
        return {"scenarios": bank.scenarios, "resident": bank.resident, "resident_bytes": bank.resident_bytes()}

    def _running(self) -> tuple[LoadedModel, GenerationWorker]:
        if self._loaded is None or self._worker is None:
            raise RuntimeError("the embedded runtime is not started")
        return self._loaded, self._worker
