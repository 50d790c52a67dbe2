"""The generation thread: the only place the model runs, so the event loop never waits on it.

The sequences being decoded advance together: one forward pass gives every one of them its next token, each with
its own keys and values (`batch.py`), sampling, stop rules and length limit; where all of them decode greedily, one
native call gives them several tokens (DECODE_CHUNK), the same tokens, taken in order. A new request's prompt is
read in chunks, one chunk between two decoding steps, so a long prompt does not stall the others; once read, its
first token is picked and it joins the batch. Weight swaps are applied between steps: every token is produced by exactly
one weight set, and the sequences that straddle a swap re-read their context under the new weights before their
next token. The same prompt as the last one read, or one that starts like the last long one, starts from its cache
(see `prefix.py`).

A scenario with a LoRA adapter (`adapters.py`) is served by the base plus its adapter, row by row within the same
batched step. A new adapter of one scenario swaps in between steps too, and only that scenario's sequences re-read
their context; the others keep decoding. An adapter that cannot be spilled or read back fails that swap or that
scenario's request, with the reason, and nothing else. Should the thread stop all the same, `failure` says why, every
waiting request and swap gets that error, and no new one is taken.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path

import torch

from reef_daemon.runtimes.embedded.adapters import AdapterBank, AdapterUnavailable, LoraAdapter
from reef_daemon.runtimes.embedded.batch import BatchCache
from reef_daemon.runtimes.embedded.decode_kernel import load_kernel, torch_on_one_thread
from reef_daemon.runtimes.embedded.decode_step import DecodedStep, native_step
from reef_daemon.runtimes.embedded.job import Event, Finished, Job, deliver, delivered_together
from reef_daemon.runtimes.embedded.loading import LoadedModel
from reef_daemon.runtimes.embedded.precision import refresh_decode_copies
from reef_daemon.runtimes.embedded.prefix import NOTHING, PrefixCache
from reef_daemon.runtimes.embedded.sampling import GreedyPicks, pick_tokens
from reef_daemon.runtimes.embedded.stopping import StopRules
from reef_daemon.runtimes.embedded.versions import ServingVersion, copy_weights, fingerprint

log = logging.getLogger("reef.embedded")

PREFILL_CHUNK = 256  # prompt tokens per turn, so one long prompt does not stall the other streams
SPEED_WINDOW = 64  # decoding calls (of one step or several) the tokens/s figure is measured over

# A stream's text between its first token and its end reaches the event loop at most this often, several tokens
# together: handed over every step, the loop's wake-ups and the client's reads took a share of the two cores the
# step runs on (served A/B, six alternating rounds: one stream 1.06x the tokens/s, four together 1.07x).
STREAM_INTERVAL_S = 0.02
RESIDENT_ADAPTERS = 8  # LoRA adapters kept in memory; the least recently used beyond spills to disk
# Greedy steps one native call may take for every row (`NativeDecodeStep.steps`): the Python around a step, run cold
# after the weights swept the caches, cost ~0.3 ms of a served one-row step of ~3.6; a row that ends within them ends
# there (an end-of-turn id ends the call), at the cost of the steps after it when a stop sequence or a loop ends it.
DECODE_CHUNK = 4

_Swap = tuple[Mapping[str, torch.Tensor] | LoraAdapter, "concurrent.futures.Future[str]"]


class GenerationWorker:
    """Runs every request's decoding on one thread, batched, and applies weight swaps between tokens."""

    def __init__(
        self, loaded: LoadedModel, end_ids: frozenset[int], spill_dir: Path, resident_adapters: int = RESIDENT_ADAPTERS
    ) -> None:
        self._loaded = loaded
        self._stops = StopRules(end_ids, loaded.context_length)
        self._numbers = ServingVersion(fingerprint(loaded.model))
        self.version = str(self._numbers)  # of the base weights: what a scenario without an adapter is served by
        self.adapters = AdapterBank(loaded.model, resident_adapters, spill_dir)
        self._lock = threading.Condition()
        self._incoming: deque[Job] = deque()
        self._swaps: deque[_Swap] = deque()
        self._applying: list[_Swap] = []  # the swaps the generation thread took, until each is applied
        self._closed = False
        self._steps: deque[tuple[float, int]] = deque(maxlen=SPEED_WINDOW)  # (seconds, tokens) of decoding steps
        self._prefix = PrefixCache()
        # Owned by the generation thread: prompts being read (taking turns), and the batch being decoded, whose
        # rows are the jobs of `_decoding` in order.
        self._reading: deque[Job] = deque()
        self._decoding: list[Job] = []
        self._joining: list[Job] = []  # prompts read this turn, joining the batch at its end
        # Events posted but not yet handed to the event loop, in order: they go as a step's native call starts, when
        # one is due (`_hand_over_due`), and all of them before the thread reads a prompt, swaps or waits.
        self._held: list[tuple[Job, Event]] = []
        self._handed_at = 0.0  # when events were last handed over (time.monotonic())
        kernel = load_kernel()
        self._native = native_step(loaded.model, kernel)  # None: transformers' forward decodes
        self._batch = BatchCache(torch.float16 if self._native is not None else torch.float32)
        self._greedy: GreedyPicks | None = kernel.pick_greedy if kernel is not None else None  # None: torch picks
        self.peak_batch = 0  # the most sequences one decoding step has advanced
        self.prompt_tokens_read = 0  # context tokens the model read (prompts, and contexts re-read after a swap)
        self.prompt_tokens_reused = 0  # and those taken from the prefix cache instead
        self.failure: str | None = None  # why the generation thread stopped before it was closed
        self._thread = threading.Thread(target=self._run, name="reef-generation", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify()
        self._thread.join()

    def submit(self, job: Job) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError(self.failure or "the generation worker is closed")
            self._incoming.append(job)
            self._lock.notify()

    def swap(self, state: Mapping[str, torch.Tensor] | LoraAdapter) -> concurrent.futures.Future[str]:
        """Queue new base weights, or a scenario's new adapter (its version is assigned here); the future gives the
        new version once no token is being computed with the old."""
        future: concurrent.futures.Future[str] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise RuntimeError(self.failure or "the generation worker is closed")
            self._swaps.append((state, future))
            self._lock.notify()
        return future

    def version_of(self, scenario: str | None) -> str:
        """The version serving `scenario`: its adapter's, or the base's for a scenario without one."""
        own = self.adapters.version(scenario) if scenario is not None else None
        return own or self.version

    def tokens_per_second(self) -> float | None:
        """Decoding speed over the last steps, all sequences together, or None before any step."""
        steps = list(self._steps)
        busy = sum(seconds for seconds, _ in steps)
        return sum(tokens for _, tokens in steps) / busy if steps and busy > 0 else None

    def _run(self) -> None:
        reason = "the embedded runtime is shutting down"
        try:
            with torch.inference_mode():
                self._serve()
        except Exception as exc:
            log.exception("the generation thread stopped")
            reason = f"the embedded model's generation thread stopped ({type(exc).__name__}: {exc}); restart reef"
            with self._lock:
                self.failure, self._closed = reason, True
        self._hand_over()
        with self._lock:
            waiting = [*self._reading, *self._joining, *self._decoding, *self._incoming]
            swaps = [*self._applying, *self._swaps]
            self._incoming.clear()
            self._swaps.clear()
        for job in waiting:
            if job.finished is None:
                job.post(Finished("error", error=reason))
        for _state, future in swaps:
            if not future.done():
                future.set_exception(RuntimeError(reason))

    def _serve(self) -> None:
        """Read prompts, decode and apply swaps until the worker is closed."""
        while True:
            with self._lock:
                while not (self._closed or self._incoming or self._swaps or self._reading or self._decoding):
                    self._hand_over()  # nothing stays held while the thread waits
                    self._lock.wait()
                if self._closed:
                    break
                self._take_arrivals()
                self._applying = list(self._swaps)
                self._swaps.clear()
            if self._reading or self._applying or not self._decoding:
                self._hand_over()  # a prompt to read or a swap before the next step: the held events go first
            for state, future in self._applying:
                self._apply_swap(state, future)
            self._applying = []
            with delivered_together(self._held):
                self._drop_cancelled()
                if self._reading:
                    self._read_turn()
                    self._take_arrivals()  # those that came during the read: the same prompt joins this step too
                while self._reading and self._reads_nothing(self._reading[0]):
                    self._read_turn()  # the same prompt again: it joins this step rather than the next
                self._join()
            if self._decoding:
                with delivered_together(self._held):  # a token for every sequence of the batch, in one wake-up
                    self._decode_step()

    def _take_arrivals(self) -> None:
        """Queue the requests that arrived since the thread last looked, to be read after those already queued."""
        with self._lock:
            self._reading.extend(self._incoming)
            self._incoming.clear()

    def _hand_over(self) -> None:
        """Hand the held events to the event loop. A step does it just before its native call (or its forward
        pass) when they are due, so the loop, woken by them, takes the interpreter's lock while this thread needs
        none: handed over at the step's end, the loop took the lock at the next step's first torch call and the step
        waited for it (0.4-0.6 ms of a served one-row step around a 3.6-4.6 ms native call)."""
        if not self._held:
            return
        events = list(self._held)
        self._held.clear()  # in place: a step's `delivered_together` block appends to this very list
        self._handed_at = time.monotonic()
        for job, _ in events:
            job.reached_loop = True
        deliver(events)

    def _hand_over_due(self) -> None:
        """Hand the held events over if one is due: a job's first text and its end go at once (the client's time
        to first token, and the record), the text between at most every STREAM_INTERVAL_S."""
        if self._held and (
            time.monotonic() - self._handed_at >= STREAM_INTERVAL_S
            or any(isinstance(event, Finished) or not job.reached_loop for job, event in self._held)
        ):
            self._hand_over()

    def _apply_swap(
        self, state: Mapping[str, torch.Tensor] | LoraAdapter, future: concurrent.futures.Future[str]
    ) -> None:
        if isinstance(state, LoraAdapter):
            self._apply_adapter(state, future)
            return
        try:
            copy_weights(self._loaded.model, state)
            refresh_decode_copies(self._loaded.model, state.keys())
        except (KeyError, ValueError, RuntimeError) as exc:
            future.set_exception(exc)
            return
        finally:  # the copies refreshed so far are new tensors: the native step must not read the freed ones
            if self._native is not None:
                self._native.follow_weights()
        self.version = self._numbers.bump()
        self._prefix.clear()
        # Every context was read by the old weights: each sequence re-reads its own before its next token.
        self._reread(lambda job: True)
        log.info("weights swapped in: version %s", self.version)
        future.set_result(self.version)

    def _apply_adapter(self, adapter: LoraAdapter, future: concurrent.futures.Future[str]) -> None:
        try:
            self.adapters.check(adapter.layers)
            version = self._numbers.bump()
            self.adapters.install(LoraAdapter(adapter.scenario, version, adapter.scale, adapter.layers))
        except ValueError as exc:
            future.set_exception(exc)
            return
        except AdapterUnavailable as exc:
            log.error("the LoRA adapter of %s was not swapped in: %s", adapter.scenario, exc)
            future.set_exception(
                AdapterUnavailable(f"the LoRA adapter of {adapter.scenario} was not swapped in: {exc}")
            )
            return
        # Only this scenario's contexts were read by its old adapter; the other sequences decode on.
        self._reread(lambda job: job.scenario == adapter.scenario)
        log.info("adapter of %s swapped in: version %s", adapter.scenario, version)
        future.set_result(version)

    def _reread(self, chosen: Callable[[Job], bool]) -> None:
        """The chosen sequences re-read their context before their next token (their cache is of old weights)."""
        for job in self._reading:
            if chosen(job):
                job.cache = None
        rows = [row for row, job in enumerate(self._decoding) if chosen(job)]
        self._reading.extend(self._decoding[row] for row in rows)
        self._leave(rows)

    def _drop_cancelled(self) -> None:
        for job in [job for job in self._reading if job.cancelled]:
            self._reading.remove(job)
            job.cache = None
            job.post(Finished("cancelled"))
        rows = [row for row, job in enumerate(self._decoding) if job.cancelled]
        for row in rows:
            self._decoding[row].post(Finished("cancelled"))
        self._leave(rows)

    def _leave(self, rows: list[int]) -> None:
        """Take these rows out of the batch (their sequences ended)."""
        self._batch.remove(rows)
        self._decoding = [job for row, job in enumerate(self._decoding) if row not in set(rows)]

    def _read_turn(self) -> None:
        """One chunk of one prompt, the reading requests taking turns; a prompt read to its end gives its first
        token and joins the batch."""
        job = self._reading.popleft()
        try:
            token = self._read(job)
            going = token is None or self._take(job, token)
        except AdapterUnavailable as exc:
            log.error("a request of %s failed: %s", job.scenario, exc)
            job.post(Finished("error", error=str(exc)))
            job.cache, going, token = None, False, None
        except Exception as exc:
            log.exception("generation failed")
            job.post(Finished("error", error=f"{type(exc).__name__}: {exc}"))
            job.cache, going, token = None, False, None
        if not going:
            job.cache = None  # free the KV cache now, not when the response object goes
        elif token is None:
            self._reading.append(job)
        else:
            self._joining.append(job)

    def _join(self) -> None:
        """The sequences whose prompts were read this turn join the batch, together (one copy of its buffers)."""
        if self._joining:
            self._batch.extend([job.cache for job in self._joining])
            for job in self._joining:
                job.cache = None
            self._decoding.extend(self._joining)
            self._joining = []

    def _read(self, job: Job) -> int | None:
        """Feed the next chunk of the job's context; the token it picks once the context is all read."""
        from transformers import DynamicCache

        model = self._loaded.model
        reused = NOTHING
        if job.cache is None:
            job.adapter = self.adapters.get(job.scenario) if job.scenario is not None else None
            context = job.prompt_ids + job.output_ids
            reused = NOTHING if job.output_ids else self._prefix.start(context, self._served_by(job))
            job.cache = reused.cache if reused.cache is not None else DynamicCache(config=model.config)
            job.pending = context[reused.shared :]
            self.prompt_tokens_reused += reused.shared
        if reused.logits is not None:  # the same prompt was read last, by the same weights: nothing to read
            logits = reused.logits
        else:
            with self.adapters.serving([job.adapter]):
                if len(job.pending) > PREFILL_CHUNK:
                    chunk, job.pending = job.pending[:PREFILL_CHUNK], job.pending[PREFILL_CHUNK:]
                    model(input_ids=torch.tensor([chunk]), cache=job.cache, use_cache=True, logits_to_keep=1)
                    self.prompt_tokens_read += len(chunk)
                    return None
                self.prompt_tokens_read += len(job.pending)
                out = model(input_ids=torch.tensor([job.pending]), cache=job.cache, use_cache=True, logits_to_keep=1)
            logits = out.logits[0, -1]
            if not job.output_ids:  # the cache holds exactly the prompt now
                self._prefix.keep(job.prompt_ids, job.cache, logits, self._served_by(job))
        ((token, logprob),) = pick_tokens(logits[None], [job.params], [job.generator], self._greedy)
        job.record(token, logprob, self._served_by(job), job.scenario if job.adapter is not None else None)
        return token

    def _reads_nothing(self, job: Job) -> bool:
        """Whether the job's whole prompt is the kept one, read by the weights that serve it."""
        if job.cache is not None or job.output_ids:
            return False
        adapter = self.adapters.version(job.scenario) if job.scenario is not None else None
        return self._prefix.holds(job.prompt_ids, adapter or self.version)

    def _served_by(self, job: Job) -> str:
        """The version of the weights reading the job's context: its adapter's, or the base's."""
        return job.adapter.version if job.adapter is not None else self.version

    def _decode_step(self) -> None:
        """A token for every decoding sequence, in one forward pass; or several, where one native call may take
        several steps (`_chunk`): each row's tokens are those single steps would give, taken in order, and a row
        that ends keeps none of the tokens decoded after its end."""
        began = time.perf_counter()
        jobs = self._decoding
        with torch_on_one_thread() if self._native is not None else contextlib.nullcontext():
            try:
                adapters = [job.adapter for job in jobs]
                count = self._chunk(adapters)
                with self.adapters.serving(adapters):
                    if count > 1 and self._native is not None:
                        tokens = [job.output_ids[-1] for job in jobs]
                        end_ids, due = self._stops.end_ids, self._hand_over_due
                        chunk = self._native.steps(tokens, self._batch, adapters, count, end_ids, due)
                    else:
                        decoded = self._logits(adapters)
                        chunk = []
                self._batch.advance(max(len(chunk), 1))
            except Exception as exc:
                log.exception("generation failed")
                for job in jobs:
                    job.post(Finished("error", error=f"{type(exc).__name__}: {exc}"))
                self._leave(list(range(len(jobs))))
                return
            if not chunk:
                params, generators = [job.params for job in jobs], [job.generator for job in jobs]
                chunk = [pick_tokens(decoded.logits, params, generators, self._greedy, decoded.picked)]
            ended: list[int] = []
            made = 0
            for picks in chunk:
                for row, (job, (token, logprob)) in enumerate(zip(jobs, picks, strict=True)):
                    if row in ended:
                        continue
                    job.record(token, logprob, self._served_by(job), job.scenario if job.adapter is not None else None)
                    made += 1
                    if not self._take(job, token):
                        ended.append(row)
        self._steps.append((time.perf_counter() - began, made))
        self.peak_batch = max(self.peak_batch, len(jobs))
        self._leave(ended)

    def _chunk(self, adapters: list[LoraAdapter | None]) -> int:
        """The steps the next native call may take: up to DECODE_CHUNK where every row is greedy, the kernel picks
        every row (`picks_all`) and no row reaches its length limit or the end of the context sooner; else one."""
        if self._native is None or not self._native.picks_all(adapters):
            return 1
        count = DECODE_CHUNK
        for job in self._decoding:
            if not job.params.greedy:
                return 1
            used = len(job.prompt_ids) + len(job.output_ids)
            count = min(count, job.params.max_tokens - len(job.output_ids), self._stops.context_length - used)
        return max(count, 1)

    def _logits(self, adapters: list[LoraAdapter | None]) -> DecodedStep:
        """The next-token logits `[rows, vocab]` of every decoding sequence (served by `adapters`, which the bank
        is serving), its key and value written; the native step picks the greedy rows' tokens too."""
        tokens = [job.output_ids[-1] for job in self._decoding]
        if self._native is not None:
            greedy = [job.params.greedy for job in self._decoding]
            return self._native.step(tokens, self._batch, adapters, greedy, self._hand_over_due)
        positions, mask = self._batch.step_inputs()
        self._hand_over_due()
        out = self._loaded.model(
            input_ids=torch.tensor([[token] for token in tokens]),
            position_ids=positions,
            attention_mask=mask,
            cache=self._batch,
            use_cache=True,
            logits_to_keep=1,
        )
        return DecodedStep(out.logits[:, -1], {})

    def _take(self, job: Job, token: int) -> bool:
        """Send a new token's text; False once the job is finished."""
        try:
            return self._stops.take(job, token)
        except Exception as exc:
            log.exception("generation failed")
            job.post(Finished("error", error=f"{type(exc).__name__}: {exc}"))
            return False
