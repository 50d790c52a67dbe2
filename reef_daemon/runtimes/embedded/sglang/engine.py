"""The `sglang` engine: an SGLang server generates; reef renders prompts, applies stop rules and stamps versions.

Reef launches the server from `inference.model-path` (`launch.py`) or attaches to one at `embedded.sglang-url`.
Prompts are rendered to ids with the model's own chat template (the API layer does this for every engine) and sent
to the native `/generate` (`protocol.py`). Each token is recorded with its log-prob and the weight version the
server reported for it.

Versions are reef's `<incarnation>:<sequence>`, numbered as the torch engine numbers them (`versions.py`): the
incarnation is a fingerprint of the checkpoint files the server loaded (`inference.model-path` when reef launches
it; the `model_path` the server reports when reef attaches), so a restart on the same weights keeps its versions.
The server's label at start reads as `<incarnation>:0`, and a bare label pushed by someone else under this
incarnation. Where the files cannot be read (a server on another host), and under Slime (which loads the served
weights from its own checkpoints, and counts its pushes 1, 2, ... from each launch), the incarnation is a `random-`
one, and the log says why.

A weight swap writes a new checkpoint folder (`weights.py`) and then, one swap at a time: pause generation
(`retract`: running requests wait in the queue, none is refused), load it with `update_weights_from_disk` under the
next version (the incarnation's next number in the ledger), continue generation. If the server refuses,
generation continues on the old weights, the old version stays, and the swap raises RuntimeError with the server's
message.

With `training.adapter = lora` (and the torch trainer), the server runs with `--enable-lora` and each scenario's
adapter is a PEFT folder loaded by name (`load_lora_adapter`); a request names its scenario's adapter in
`lora_path`, and its tokens carry the adapter's version. A new version is loaded under a new name, and the old one
is unloaded once the requests it serves have ended; a swap pauses nothing.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import subprocess
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import aiohttp

from reef_contract import ServedAdapters, WeightVersion
from reef_daemon.recipe_host import resolve_recipe
from reef_daemon.runtimes.embedded.adapters import write_peft_folder
from reef_daemon.runtimes.embedded.engine import Engine
from reef_daemon.runtimes.embedded.job import Finished, Job
from reef_daemon.runtimes.embedded.sglang import launch, protocol
from reef_daemon.runtimes.embedded.sglang.weights import write_updated
from reef_daemon.runtimes.embedded.stopping import StopRules, end_ids, send_text
from reef_daemon.runtimes.embedded.versions import (
    RANDOM_PREFIX,
    ServingVersion,
    fingerprint_files,
    random_incarnation,
)
from reef_daemon.setting_kinds import SettingsError
from reef_daemon.settings import Settings

if TYPE_CHECKING:
    from reef_daemon.recipe_interface import Serving


log = logging.getLogger("reef.embedded")

VERSIONS_FOLDER = "sglang-weights"
ADAPTERS_FOLDER = "sglang-adapters"


@dataclass(frozen=True)
class _Adapter:
    """A LoRA adapter loaded into the server: its name there, its version, and its folder."""

    name: str
    version: str
    folder: Path


def lora_launch(serving: Serving) -> launch.LoraLaunch | None:
    """SGLang's LoRA serving when the recipe serves adapters; None otherwise."""
    adapters = serving.adapters
    return None if adapters is None else launch.LoraLaunch(adapters.rank, adapters.target_modules)


class SglangEngine(Engine):
    name: ClassVar[str] = "sglang"

    def __init__(self, settings: Settings) -> None:
        embedded = settings.embedded
        self._settings = settings
        self._timeout_s = settings.inference.timeout_s
        self._model_path = settings.inference.model_path
        self._launch_folder: Path | None = None
        self._plan: launch.LaunchPlan | None = None
        # Under a Slime run, Slime starts the engines and their router once reef's recipe has started it: reef
        # attaches to the router without waiting for it.
        serving = resolve_recipe(settings.recipe).serving(settings)
        self._by_slime = serving.engines_started_by_trainer
        if self._by_slime:
            self._url = embedded.sglang_url or f"http://{launch.node_address()}:{embedded.sglang_port}"
        elif embedded.sglang_url is None:
            self._launch_folder = launch.check_launchable(self._model_path)
            self._url = launch.local_url(embedded.sglang_port)
        else:
            self._url = embedded.sglang_url
        self._process: subprocess.Popen[bytes] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._tokenizer: Any = None
        self._stops: StopRules | None = None
        self._weights_dir: Path | None = None
        self._weights = ServingVersion(random_incarnation())  # until start reads the served checkpoint
        self._start_label = protocol.DEFAULT_VERSION
        self._label = protocol.DEFAULT_VERSION
        self._sync = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._lora = None if self._by_slime else lora_launch(serving)
        self._adapters: dict[str, _Adapter] = {}  # by scenario: the adapter serving it
        self._in_flight: Counter[str] = Counter()  # requests running, by adapter name
        self._retired: dict[str, _Adapter] = {}  # replaced adapters, unloaded once their requests end

    async def start(self) -> None:
        """Launch or reach the server and read the model; SettingsError (after stopping what it started) when the
        server does not come up or cannot be read."""
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_read=self._timeout_s))
        try:
            await self._connect()
        except (RuntimeError, aiohttp.ClientError, OSError, ValueError) as exc:
            await self.close()
            raise SettingsError(f"the sglang engine did not start: {exc}") from None

    async def _connect(self) -> None:
        if self._launch_folder is not None:
            self._weights = await asyncio.to_thread(_weights_of, self._launch_folder, "")
            embedded, state_dir = self._settings.embedded, self._settings.reef.state_dir
            self._plan = launch.plan_launch(self._launch_folder, str(self._weights), embedded, state_dir, self._lora)
        info = {} if self._by_slime else await self._reach()
        served = info.get("model_path")
        served_dir = Path(str(served)) if served else None
        if self._by_slime:
            self._weights = _random_weights("Slime loads the weights SGLang serves from its own checkpoints")
        elif self._plan is None and served_dir is None:
            self._weights = _random_weights(f"the SGLang server at {self._url} reports no model path")
        elif self._plan is None and served_dir is not None:
            served_by = f" that the SGLang server at {self._url} reports"
            self._weights = await asyncio.to_thread(_weights_of, served_dir, served_by)
        self._start_label = self._label = str(info.get("weight_version") or protocol.DEFAULT_VERSION)
        folder = self._model_path or Path(str(info.get("tokenizer_path") or served or ""))
        self._tokenizer, generation_config, context = await asyncio.to_thread(_read_model, folder)
        self._stops = StopRules(end_ids(self._tokenizer, generation_config), context)
        # A swap rewrites the checkpoint the server holds: the folder it reports, when reef can read it.
        fingerprinted = not self._weights.incarnation.startswith(RANDOM_PREFIX)
        self._weights_dir = served_dir if fingerprinted and served_dir is not None else folder
        log.info("serving through SGLang at %s (model %s, weights %s)", self._url, folder.name, self.version)

    async def _reach(self) -> dict[str, Any]:
        """Start the server reef launches, wait until it is healthy, and read its model info."""
        if self._plan is not None:
            log.info("starting SGLang: %s", " ".join(self._plan.argv))
            self._process = launch.start_server(self._plan)
        timeout = self._settings.embedded.sglang_start_timeout_s
        log_file = self._plan.log_file if self._plan else Path("(the server's own log)")
        await launch.wait_healthy(self._client(), self._url, timeout, self._process, log_file)
        return await self._get(protocol.MODEL_INFO)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._process is not None:
            await asyncio.to_thread(launch.stop_server, self._process)
            self._process = None

    @property
    def model_name(self) -> str:
        return self._running_dir().name

    @property
    def tokenizer(self) -> Any:
        self._running_dir()
        return self._tokenizer

    @property
    def context_length(self) -> int:
        return self._rules().context_length

    @property
    def version(self) -> str:
        return self._version_of(self._label)

    @property
    def weights_dir(self) -> Path:
        return self._running_dir()

    @property
    def serves_adapters(self) -> bool:
        return self._lora is not None

    def adapter_version(self, scenario: str) -> str:
        adapter = self._adapters.get(scenario)
        return adapter.version if adapter is not None else self.version

    async def swap_adapter(self, scenario: str, state: Mapping[str, Any], scale: float) -> str:
        if self._lora is None:
            raise RuntimeError("the SGLang server serves no LoRA adapters here (training.adapter = lora starts it so)")
        async with self._sync:
            version = await asyncio.to_thread(self._next_version)
            name = f"{scenario}-{self._weights.sequence}"
            folder = self._settings.reef.state_dir / ADAPTERS_FOLDER / name
            await asyncio.to_thread(write_peft_folder, folder, state, scale, str(self._running_dir()))
            status, answer = await self._call(protocol.LOAD_LORA, {"lora_name": name, "lora_path": str(folder)})
            if status != 200 or not answer.get("success", False):
                await asyncio.to_thread(shutil.rmtree, folder, True)
                message = answer.get("error_message") or answer.get("message") or f"HTTP {status}"
                raise RuntimeError(f"SGLang did not load the adapter of {scenario} ({message})")
            old = self._adapters.get(scenario)
            self._adapters[scenario] = _Adapter(name, version, folder)
            log.info("adapter of %s loaded into SGLang as %s: version %s", scenario, name, version)
        if old is not None:
            self._retired[old.name] = old
            await self._unload_idle(old.name)
        return version

    async def _unload_idle(self, name: str) -> None:
        """Unload a replaced adapter once no request it serves is running."""
        if self._in_flight[name] or name not in self._retired:
            return
        old = self._retired.pop(name)
        del self._in_flight[name]  # its name is never served again: a new version loads under a new one
        try:
            await self._post(protocol.UNLOAD_LORA, {"lora_name": name})
        except RuntimeError as exc:  # it stays loaded on the server; nothing serves with it any more
            log.warning("could not unload the adapter %s from SGLang: %s", name, exc)
        await asyncio.to_thread(shutil.rmtree, old.folder, True)

    def identity(self) -> dict[str, str]:
        source = str(self._model_path) if self._model_path is not None else self._url
        name = self._model_path.name if self._model_path is not None else "(the server's model)"
        return {"model": name, "source": source, "url": self._url}

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = {"context_length": self.context_length, "weights": str(self.weights_dir)}
        if self._adapters:  # every adapter is loaded into the server: all resident
            served: ServedAdapters = {"scenarios": sorted(self._adapters), "resident": sorted(self._adapters)}
            described["adapters"] = served
        return described

    def submit(self, job: Job) -> None:
        task = asyncio.get_running_loop().create_task(self._generate(job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def swap_weights(self, state: Mapping[str, Any]) -> str:
        async with self._sync:
            current = self._running_dir()
            label = await asyncio.to_thread(self._next_version)
            incarnation, sequence = self._weights.incarnation, self._weights.sequence
            folder = self._settings.reef.state_dir / VERSIONS_FOLDER / f"v{sequence:06d}-{incarnation[:8]}"
            await asyncio.to_thread(write_updated, current, state, folder)
            try:
                await self._load(folder, label)
            except RuntimeError:
                await asyncio.to_thread(shutil.rmtree, folder, True)
                raise
            self._label = label
            self._weights_dir = folder
            if current.parent == folder.parent:  # an older folder reef wrote; the model's own is never removed
                await asyncio.to_thread(shutil.rmtree, current, True)
            log.info("weights loaded into SGLang: version %s", label)
            return label

    async def _load(self, folder: Path, label: str) -> None:
        """Pause between tokens, load the folder under `label`, continue; RuntimeError with the server's reason."""
        old = self.version
        await self._post(protocol.PAUSE, {"mode": protocol.PAUSE_MODE})
        try:
            body = protocol.update_from_disk_body(str(folder), label)
            status, answer = await self._call(protocol.UPDATE_FROM_DISK, body)
        finally:
            await self._post(protocol.CONTINUE, {})
        if status != 200 or not answer.get("success", False):
            message = answer.get("message") or f"HTTP {status}"
            raise RuntimeError(f"SGLang did not load the new weights ({message}); still serving {old}")

    async def _generate(self, job: Job) -> None:
        adapter = self._adapters.get(job.scenario) if job.scenario is not None else None
        if adapter is None:
            await self._generate_with(job, None)
            return
        self._in_flight[adapter.name] += 1
        try:
            await self._generate_with(job, adapter)
        finally:
            self._in_flight[adapter.name] -= 1
            await self._unload_idle(adapter.name)

    async def _generate_with(self, job: Job, adapter: _Adapter | None) -> None:
        rules = self._rules()
        room = rules.context_length - len(job.prompt_ids)
        name = adapter.name if adapter is not None else None
        body = protocol.generate_body(job.prompt_ids, job.params, min(job.params.max_tokens, room), name)
        try:
            async with self._client().post(f"{self._url}{protocol.GENERATE}", json=body) as response:
                if response.status != 200:
                    text = (await response.text())[:500]
                    job.post(Finished("error", error=f"SGLang answered HTTP {response.status}: {text}"))
                    return
                await self._follow(job, rules, response, adapter)
        except asyncio.CancelledError:
            if job.finished is None:
                job.post(Finished("error", error="the sglang engine closed"))
            raise
        except Exception as exc:  # a broken request ends as an error; its reader is never left waiting
            if not isinstance(exc, aiohttp.ClientError | TimeoutError | ValueError):
                log.exception("generation through SGLang failed")
            if job.finished is None:
                job.post(Finished("error", error=f"SGLang: {type(exc).__name__}: {exc}"))

    async def _follow(
        self, job: Job, rules: StopRules, response: aiohttp.ClientResponse, adapter: _Adapter | None
    ) -> None:
        """Record the streamed tokens until the job ends (leaving closes the stream, which aborts the request);
        the tokens of an adapter's request carry the adapter's version."""
        async for event in protocol.events(response.content):
            if job.cancelled:
                job.post(Finished("cancelled"))
                return
            for token in protocol.new_tokens(event, len(job.output_ids)):
                self._observe(token.version)
                if adapter is None:
                    job.record(token.id, token.logprob, self._version_of(token.version))
                else:
                    job.record(token.id, token.logprob, adapter.version, job.scenario)
                if not rules.take(job, token.id):
                    return
            reason = protocol.finish_reason(event)
            if reason is not None:
                job.post(_finished(reason, job))
                return
        job.post(Finished("error", error="the SGLang stream ended before the answer finished"))

    def _version_of(self, label: str) -> str:
        """Reef's `<incarnation>:<sequence>` for a server label: the label the server started this run with is the
        served checkpoint's `:0`, and bare labels belong to this engine's incarnation."""
        incarnation = self._weights.incarnation
        if label in (self._start_label, protocol.DEFAULT_VERSION):
            return f"{incarnation}:0"
        if ":" in label:
            return label
        return f"{incarnation}:{label}"

    def _observe(self, label: str) -> None:
        """Follow a newer label seen on a token (weights pushed by someone else, e.g. Slime); older ones, from
        events read after a swap, change nothing."""
        seen, now = _sequence(self._version_of(label)), _sequence(self.version)
        if seen is not None and (now is None or seen > now):
            self._label = label

    def _next_version(self) -> str:
        """Claim the version of the next swap: past the one serving (which Slime may have moved) and the ledger's."""
        serving = WeightVersion.parse(self.version)
        if serving is not None and serving.incarnation == self._weights.incarnation:
            self._weights.sequence = max(self._weights.sequence, serving.sequence)
        return self._weights.bump()

    async def _get(self, path: str) -> dict[str, Any]:
        async with self._client().get(f"{self._url}{path}") as response:
            body: dict[str, Any] = await response.json(content_type=None)
            return body

    async def _call(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        try:
            async with self._client().post(f"{self._url}{path}", json=body) as response:
                answer = await response.json(content_type=None)
                return response.status, answer if isinstance(answer, dict) else {}
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise RuntimeError(f"SGLang {path} failed: {type(exc).__name__}: {exc}") from exc

    async def _post(self, path: str, body: dict[str, Any]) -> None:
        status, answer = await self._call(path, body)
        if status != 200:
            raise RuntimeError(f"SGLang {path} answered HTTP {status}: {answer.get('message', answer)}")

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("the sglang engine is not started")
        return self._session

    def _rules(self) -> StopRules:
        if self._stops is None:
            raise RuntimeError("the sglang engine is not started")
        return self._stops

    def _running_dir(self) -> Path:
        if self._weights_dir is None:
            raise RuntimeError("the sglang engine is not started")
        return self._weights_dir


def _weights_of(folder: Path, served_by: str) -> ServingVersion:
    """The version of the checkpoint in `folder` as loaded: its fingerprint's `:0`, or a random incarnation (and
    the reason in the log) when the files cannot be read here."""
    try:
        return ServingVersion(fingerprint_files(folder))
    except (OSError, ValueError) as exc:
        return _random_weights(f"the checkpoint {folder}{served_by} cannot be read here ({exc})")


def _random_weights(reason: str) -> ServingVersion:
    """A version of this run's own, and why in the log (once: the engine keeps it until it stops)."""
    weights = ServingVersion(random_incarnation())
    log.warning(
        "weight versions of this run use the random incarnation %s, so they match no other run's: %s",
        weights.incarnation,
        reason,
    )
    return weights


def _sequence(version: str) -> int | None:
    parsed = WeightVersion.parse(version)
    return None if parsed is None else parsed.sequence


def _finished(reason: dict[str, Any], job: Job) -> Finished:
    """The job's end from SGLang's finish reason (reached when reef's own rules did not end it first)."""
    kind = reason.get("type")
    if kind == "length":
        send_text(job, job.text.finish())
        return Finished("length")
    if kind == "stop":
        send_text(job, job.text.finish())
        return Finished("stop")
    return Finished("error", error=f"SGLang ended the request: {reason.get('message', kind)}")


def _read_model(folder: Path) -> tuple[Any, Any, int]:
    """The tokenizer, generation config and context length of the served model's folder."""
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    from reef_daemon.runtimes.embedded.loading import offline

    offline()
    tokenizer: Any = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    if not getattr(tokenizer, "chat_template", None):
        raise SettingsError(f"the model at {folder} has no chat template, so it cannot serve chat requests")
    config: Any = AutoConfig.from_pretrained(folder, local_files_only=True)
    try:
        generation: Any = GenerationConfig.from_pretrained(folder, local_files_only=True)
    except OSError:
        generation = None
    return tokenizer, generation, int(getattr(config, "max_position_embeddings", 2048))
