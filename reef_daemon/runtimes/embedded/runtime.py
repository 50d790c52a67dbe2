"""The `embedded` runtime: a model reef serves itself, through an engine (`engine.py`): `torch` in this process,
or `sglang`, an SGLang server reef launches or attaches to.

Answers chat completions, Responses and Messages in each API's own shape, streaming or not; records prompt ids,
output ids, per-token log-probs and the weight version of every token; swaps weights between tokens. A request's
scenario picks its LoRA adapter, where a weight recipe trained one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple, cast

from reef_contract import CHAT_ROUTE, COUNT_TOKENS_ROUTE, MESSAGES_ROUTE, RESPONSES_ROUTE, RuntimeStatus
from reef_daemon.errors import BadRequest, UpstreamFailed
from reef_daemon.runtimes.base import RuntimeResponse, WeightSwappable
from reef_daemon.runtimes.embedded.apis import chat, messages, responses
from reef_daemon.runtimes.embedded.apis.base import GenerationRequest, Renderer
from reef_daemon.runtimes.embedded.engine import Engine
from reef_daemon.runtimes.embedded.engines import build_engine
from reef_daemon.runtimes.embedded.job import Job
from reef_daemon.runtimes.embedded.response import GenerationAnswer, JsonAnswer
from reef_daemon.runtimes.embedded.sampling import SamplingDefaults
from reef_daemon.runtimes.embedded.templating import ChatTurn, render_prompt
from reef_daemon.runtimes.embedded.text import TextAssembler
from reef_daemon.settings import Settings

log = logging.getLogger("reef.embedded")

PROMPT_THREADS = 2  # prompts tokenized at once, on threads of their own (not the pool the store's reader uses)


class Api(NamedTuple):
    parse: Any  # (payload, SamplingDefaults) -> GenerationRequest
    renderer: type[Renderer]
    error_body: Any  # (message) -> dict


APIS: dict[str, Api] = {
    CHAT_ROUTE: Api(chat.parse, chat.ChatRenderer, chat.error_body),
    RESPONSES_ROUTE: Api(responses.parse, responses.ResponsesRenderer, responses.error_body),
    MESSAGES_ROUTE: Api(messages.parse, messages.MessagesRenderer, messages.error_body),
}


class EmbeddedRuntime(WeightSwappable):
    kind = "embedded"
    answerer = "the embedded model"

    def __init__(self, settings: Settings) -> None:
        self._defaults = _sampling_defaults(settings)
        self._max_prompt_chars = settings.inference.max_prompt_chars
        self._engine = build_engine(settings)
        self._prompts = ThreadPoolExecutor(PROMPT_THREADS, thread_name_prefix="reef-embedded-prompt")
        self._started = False

    async def start(self) -> None:
        await self._engine.start()
        self._started = True

    async def close(self) -> None:
        self._started = False
        await self._engine.close()
        self._prompts.shutdown(wait=False, cancel_futures=True)

    @property
    def engine(self) -> Engine:
        """What generates the tokens (torch in this process, or an SGLang server)."""
        return self._engine

    @property
    def sampling_defaults(self) -> SamplingDefaults:
        """What a request that sets no temperature, top_p or length limit gets."""
        return self._defaults

    def reconfigure(self, settings: Settings) -> None:
        if settings.inference.upstream_url:
            log.warning("an upstream URL was configured; restart reef to serve it instead of the embedded model")

    def failure(self) -> str | None:
        return self._engine.failure if self._started else None

    def describe(self) -> RuntimeStatus:
        info: dict[str, Any] = {"kind": self.kind, "engine": self._engine.name, **self._engine.identity()}
        info["sampling"] = {
            "temperature": self._defaults.temperature,
            "top_p": self._defaults.top_p,
            "max_tokens": self._defaults.max_tokens,
            "max_answer_tokens": self._defaults.max_answer_tokens,
            "max_answer_s": self._defaults.max_answer_s,
            "repeat_stop_tokens": self._defaults.repeat_stop_tokens,
        }
        if self._started:
            info.update({"weight_version": self._engine.version, **self._engine.describe()})
        return cast(RuntimeStatus, info)

    @property
    def weight_version(self) -> str:
        """The version of the weights serving now, `<incarnation>:<sequence>`."""
        return self._running().version

    @property
    def weights_dir(self) -> Path:
        """The Hugging Face folder the serving weights were loaded from (the safetensors cache for a GGUF)."""
        return self._running().weights_dir

    async def swap_weights(self, state: Mapping[str, Any]) -> str:
        """Swap in new weights (a full or partial state dict) between tokens; returns the new weight version."""
        return await self._running().swap_weights(state)

    @property
    def serves_adapters(self) -> bool:
        """Whether the engine serves LoRA adapters (`swap_adapter`)."""
        return self._engine.serves_adapters

    async def swap_adapter(self, scenario: str, state: Mapping[str, Any], scale: float) -> str:
        """Serve `scenario` by a new LoRA adapter from its next token on; returns the adapter's version."""
        return await self._running().swap_adapter(scenario, state, scale)

    def adapter_version(self, scenario: str) -> str:
        """The version serving `scenario`: its adapter's, or the base weights' for a scenario without one."""
        return self._running().adapter_version(scenario)

    async def send(
        self,
        route: str,
        body: bytes,
        payload: dict[str, Any],
        headers: Mapping[str, str],
        *,
        scenario: str | None = None,
    ) -> RuntimeResponse:
        engine = self._running()
        if route == COUNT_TOKENS_ROUTE:
            try:
                ids = await self._prompt_ids(engine, messages.conversation(payload))
            except BadRequest as exc:
                return JsonAnswer(400, messages.error_body(exc.message))
            return JsonAnswer(200, {"input_tokens": len(ids)})
        api = APIS.get(route)
        if api is None:
            return JsonAnswer(404, {"error": {"type": "not_found", "message": f"no route {route}"}})
        try:
            request: GenerationRequest = api.parse(payload, self._defaults)
            prompt_ids = await self._prompt_ids(engine, request.turns)
        except BadRequest as exc:
            return JsonAnswer(400, api.error_body(exc.message))
        if len(prompt_ids) >= engine.context_length:
            message = (
                f"the prompt has {len(prompt_ids)} tokens; {engine.model_name} reads at most {engine.context_length}"
            )
            return JsonAnswer(400, api.error_body(message))
        job = Job(
            prompt_ids=prompt_ids,
            params=request.params,
            text=TextAssembler(engine.tokenizer, request.params.stop),
            loop=asyncio.get_running_loop(),
            admitted_version=engine.adapter_version(scenario) if scenario is not None else engine.version,
            scenario=scenario,
        )
        try:
            engine.submit(job)
        except RuntimeError as exc:
            raise UpstreamFailed(f"the embedded model cannot answer: {exc}", type="runtime_failed") from None
        return GenerationAnswer(
            job, api.renderer(engine.model_name, payload, request.params, len(prompt_ids)), request.stream
        )

    async def _prompt_ids(self, engine: Engine, turns: list[ChatTurn]) -> list[int]:
        """The prompt's token ids; a BadRequest, before any tokenizing, when its text passes
        inference.max-prompt-chars (tokenizing takes time and memory in proportion to the text)."""
        chars = sum(len(turn.content) for turn in turns)
        if chars > self._max_prompt_chars:
            raise BadRequest(
                f"the prompt has {chars} characters; the embedded model takes at most {self._max_prompt_chars} "
                "(the setting inference.max-prompt-chars)"
            )
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._prompts, render_prompt, engine.tokenizer, turns)

    def _running(self) -> Engine:
        if not self._started:
            raise RuntimeError("the embedded runtime is not started")
        return self._engine


def _sampling_defaults(settings: Settings) -> SamplingDefaults:
    inference = settings.inference
    return SamplingDefaults(
        inference.temperature,
        inference.top_p,
        inference.max_tokens,
        max_answer_tokens=inference.max_answer_tokens,
        max_answer_s=inference.max_answer_s,
        repeat_stop_tokens=inference.repeat_stop_tokens,
        max_stop_sequences=inference.max_stop_sequences,
        max_stop_chars=inference.max_stop_chars,
    )
