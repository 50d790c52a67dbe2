"""The `embedded` runtime: a small instruct model generating on this machine's CPU, in-process.

Answers chat completions, Responses and Messages in each API's own shape, streaming or not; records prompt ids,
output ids, per-token log-probs and the weight version of every token; swaps weights between tokens.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from reef_daemon.contract import RuntimeStatus
from reef_daemon.errors import BadRequest
from reef_daemon.runtimes.base import RuntimeResponse, WeightSwappable
from reef_daemon.runtimes.embedded.apis import chat, messages, responses
from reef_daemon.runtimes.embedded.apis.base import GenerationRequest, Renderer
from reef_daemon.runtimes.embedded.job import Job
from reef_daemon.runtimes.embedded.loading import LoadedModel, load_model, resolve_source
from reef_daemon.runtimes.embedded.response import GenerationAnswer, JsonAnswer
from reef_daemon.runtimes.embedded.sampling import SamplingDefaults
from reef_daemon.runtimes.embedded.templating import render_prompt
from reef_daemon.runtimes.embedded.text import TextAssembler
from reef_daemon.runtimes.embedded.worker import GenerationWorker
from reef_daemon.settings import Settings

log = logging.getLogger("reef.embedded")

COUNT_TOKENS_ROUTE = "/v1/messages/count_tokens"


class Api(NamedTuple):
    parse: Any  # (payload, SamplingDefaults) -> GenerationRequest
    renderer: type[Renderer]
    error_body: Any  # (message) -> dict


APIS: dict[str, Api] = {
    "/v1/chat/completions": Api(chat.parse, chat.ChatRenderer, chat.error_body),
    "/v1/responses": Api(responses.parse, responses.ResponsesRenderer, responses.error_body),
    "/v1/messages": Api(messages.parse, messages.MessagesRenderer, messages.error_body),
}


class EmbeddedRuntime(WeightSwappable):
    kind = "embedded"

    def __init__(self, settings: Settings) -> None:
        self._source = resolve_source(settings.inference.model_path)
        self._state_dir = settings.reef.state_dir
        self._defaults = _sampling_defaults(settings)
        self._loaded: LoadedModel | None = None
        self._worker: GenerationWorker | None = None
        self._load_s: float | None = None

    async def start(self) -> None:
        began = time.perf_counter()
        self._loaded = await asyncio.to_thread(load_model, self._source, self._state_dir)
        self._load_s = time.perf_counter() - began
        self._worker = GenerationWorker(self._loaded, _end_ids(self._loaded))
        self._worker.start()
        log.info(
            "embedded model %s loaded in %.1f s (%s)",
            self._loaded.name, self._load_s, "dequantised and cached" if self._loaded.cold else "from cache",
        )  # fmt: skip

    async def close(self) -> None:
        if self._worker is not None:
            await asyncio.to_thread(self._worker.close)
            self._worker = None

    @property
    def sampling_defaults(self) -> SamplingDefaults:
        """What a request that sets no temperature, top_p or length limit gets."""
        return self._defaults

    def reconfigure(self, settings: Settings) -> None:
        if settings.inference.upstream_url:
            log.warning("an upstream URL was configured; restart reef to serve it instead of the embedded model")

    def describe(self) -> RuntimeStatus:
        info: RuntimeStatus = {
            "kind": self.kind,
            "model": self._source.name,
            "source": str(self._source.path),
            "sampling": {
                "temperature": self._defaults.temperature,
                "top_p": self._defaults.top_p,
                "max_tokens": self._defaults.max_tokens,
            },
        }
        if self._loaded is not None and self._worker is not None:
            speed = self._worker.tokens_per_second()
            info.update(
                {
                    "parameters": self._loaded.parameters,
                    "weight_version": self.weight_version,
                    "tokens_per_second": round(speed, 1) if speed is not None else None,
                    "peak_batch": self._worker.peak_batch,
                    "context_length": self._loaded.context_length,
                    "weights": str(self.weights_dir),
                    "load_s": round(self._load_s or 0.0, 3),
                }
            )
        return info

    @property
    def weight_version(self) -> str:
        """The version of the weights serving now, `<incarnation>:<sequence>`."""
        return str(self._running()[1].version)

    @property
    def weights_dir(self) -> Path:
        """The fp32 Hugging Face folder the serving weights were loaded from (the safetensors cache for a GGUF)."""
        return self._running()[0].weights_dir

    async def swap_weights(self, state: Mapping[str, Any]) -> str:
        """Swap in new weights (a full or partial state dict) between tokens; returns the new weight version."""
        return await asyncio.wrap_future(self._running()[1].swap(state))

    async def send(
        self, route: str, body: bytes, payload: dict[str, Any], headers: Mapping[str, str]
    ) -> RuntimeResponse:
        loaded, worker = self._running()
        if route == COUNT_TOKENS_ROUTE:
            try:
                turns = messages.conversation(payload)
                ids = await asyncio.to_thread(render_prompt, loaded.tokenizer, turns)
            except BadRequest as exc:
                return JsonAnswer(400, messages.error_body(exc.message))
            return JsonAnswer(200, {"input_tokens": len(ids)})
        api = APIS.get(route)
        if api is None:
            return JsonAnswer(404, {"error": {"type": "not_found", "message": f"no route {route}"}})
        try:
            request: GenerationRequest = api.parse(payload, self._defaults)
            prompt_ids = await asyncio.to_thread(render_prompt, loaded.tokenizer, request.turns)
        except BadRequest as exc:
            return JsonAnswer(400, api.error_body(exc.message))
        if len(prompt_ids) >= loaded.context_length:
            message = f"the prompt has {len(prompt_ids)} tokens; {loaded.name} reads at most {loaded.context_length}"
            return JsonAnswer(400, api.error_body(message))
        job = Job(
            prompt_ids=prompt_ids,
            params=request.params,
            text=TextAssembler(loaded.tokenizer, request.params.stop),
            loop=asyncio.get_running_loop(),
            admitted_version=str(worker.version),
        )
        worker.submit(job)
        return GenerationAnswer(
            job, api.renderer(loaded.name, payload, request.params, len(prompt_ids)), request.stream
        )

    def _running(self) -> tuple[LoadedModel, GenerationWorker]:
        if self._loaded is None or self._worker is None:
            raise RuntimeError("the embedded runtime is not started")
        return self._loaded, self._worker


def _sampling_defaults(settings: Settings) -> SamplingDefaults:
    inference = settings.inference
    return SamplingDefaults(inference.temperature, inference.top_p, inference.max_tokens)


def _end_ids(loaded: LoadedModel) -> frozenset[int]:
    """Token ids that end the assistant's turn."""
    ids: set[int] = set()
    for value in (loaded.tokenizer.eos_token_id, loaded.model.generation_config.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, list):
            ids.update(v for v in value if isinstance(v, int))
    return frozenset(ids)
