"""The generation thread: the only place the model runs, so the event loop never waits on it.

Requests take turns one step each (a token, or a chunk of a long prompt), so concurrent streams all advance.
Weight swaps are applied between steps: every token is produced by exactly one weight set, and a request that
straddles a swap re-reads its context under the new weights before its next token. A prompt that starts like the
last long one read starts from its cache (see `prefix.py`).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections import deque
from collections.abc import Mapping

import torch

from reef_daemon.runtimes.embedded.job import Finished, Job, TextDelta
from reef_daemon.runtimes.embedded.loading import LoadedModel
from reef_daemon.runtimes.embedded.precision import refresh_decode_copies
from reef_daemon.runtimes.embedded.prefix import PrefixCache
from reef_daemon.runtimes.embedded.sampling import pick_token
from reef_daemon.runtimes.embedded.versions import WeightVersion, copy_weights

log = logging.getLogger("reef.embedded")

PREFILL_CHUNK = 256  # prompt tokens per turn, so one long prompt does not stall the other streams
SPEED_WINDOW = 64  # decode steps the tokens/s figure is measured over

_Swap = tuple[Mapping[str, torch.Tensor], "concurrent.futures.Future[str]"]


class GenerationWorker:
    """Runs every request's decoding on one thread, fairly, and applies weight swaps between tokens."""

    def __init__(self, loaded: LoadedModel, end_ids: frozenset[int]) -> None:
        self._loaded = loaded
        self._end_ids = end_ids
        self.version = WeightVersion()
        self._lock = threading.Condition()
        self._incoming: deque[Job] = deque()
        self._swaps: deque[_Swap] = deque()
        self._closed = False
        self._steps: deque[tuple[float, float]] = deque(maxlen=SPEED_WINDOW)  # (start, end) of decode steps
        self._prefix = PrefixCache()
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
                raise RuntimeError("the generation worker is closed")
            self._incoming.append(job)
            self._lock.notify()

    def swap(self, state: Mapping[str, torch.Tensor]) -> concurrent.futures.Future[str]:
        """Queue new weights; the future gives the new version once no token is being computed with the old."""
        future: concurrent.futures.Future[str] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the generation worker is closed")
            self._swaps.append((state, future))
            self._lock.notify()
        return future

    def tokens_per_second(self) -> float | None:
        """Decode speed over the last steps, or None before any token was generated."""
        steps = list(self._steps)
        busy = sum(end - start for start, end in steps)
        return len(steps) / busy if steps and busy > 0 else None

    def _run(self) -> None:
        active: deque[Job] = deque()
        with torch.inference_mode():
            while True:
                with self._lock:
                    while not (self._closed or self._incoming or self._swaps or active):
                        self._lock.wait()
                    if self._closed:
                        break
                    active.extend(self._incoming)
                    self._incoming.clear()
                    swaps = list(self._swaps)
                    self._swaps.clear()
                for state, future in swaps:
                    self._apply_swap(state, future, active)
                if active:
                    job = active.popleft()
                    if self._advance(job):
                        active.append(job)
        for job in [*active, *self._incoming]:
            job.post(Finished("error", error="the embedded runtime is shutting down"))
        for _state, future in self._swaps:
            future.set_exception(RuntimeError("the embedded runtime is shutting down"))

    def _apply_swap(
        self, state: Mapping[str, torch.Tensor], future: concurrent.futures.Future[str], active: deque[Job]
    ) -> None:
        try:
            copy_weights(self._loaded.model, state)
            refresh_decode_copies(self._loaded.model, state.keys())
        except (KeyError, ValueError, RuntimeError) as exc:
            future.set_exception(exc)
            return
        version = self.version.bump()
        self._prefix.clear()
        for job in active:
            job.cache = None  # its context was read by the old weights
        log.info("weights swapped in: version %s", version)
        future.set_result(version)

    def _advance(self, job: Job) -> bool:
        """One turn for one request; False once it is finished."""
        if job.cancelled:
            job.post(Finished("cancelled"))
            job.cache = None
            return False
        try:
            going = self._step(job)
        except Exception as exc:
            log.exception("generation failed")
            job.post(Finished("error", error=f"{type(exc).__name__}: {exc}"))
            going = False
        if not going:
            job.cache = None  # free the KV cache now, not when the response object goes
        return going

    def _step(self, job: Job) -> bool:
        from transformers import DynamicCache

        model = self._loaded.model
        if job.cache is None:
            context = job.prompt_ids + job.output_ids
            cache, reused = (None, 0) if job.output_ids else self._prefix.start(context)
            job.cache = cache if cache is not None else DynamicCache(config=model.config)
            job.pending = context[reused:]
        if len(job.pending) > PREFILL_CHUNK:
            chunk, job.pending = job.pending[:PREFILL_CHUNK], job.pending[PREFILL_CHUNK:]
            model(input_ids=torch.tensor([chunk]), cache=job.cache, use_cache=True, logits_to_keep=1)
            return True
        decoding = len(job.pending) == 1
        began = time.perf_counter()
        out = model(input_ids=torch.tensor([job.pending]), cache=job.cache, use_cache=True, logits_to_keep=1)
        token, logprob = pick_token(out.logits[0, -1], job.params, job.generator)
        if decoding:
            self._steps.append((began, time.perf_counter()))
        elif not job.output_ids:
            self._prefix.keep(job.prompt_ids, job.cache)  # the cache holds exactly the prompt now
        job.record(token, logprob, str(self.version))
        job.pending = [token]
        return self._emit(job, token)

    def _emit(self, job: Job, token: int) -> bool:
        """Send the token's text; finish the job at an end-of-turn id, a stop sequence or the length limit."""
        if token in self._end_ids:
            self._send(job, job.text.finish())
            job.post(Finished("stop"))
            return False
        self._send(job, job.text.add(token))
        if job.text.stopped_by is not None:
            job.post(Finished("stop", stop_sequence=job.text.stopped_by))
            return False
        used = len(job.prompt_ids) + len(job.output_ids)
        if len(job.output_ids) >= job.params.max_tokens or used >= self._loaded.context_length:
            self._send(job, job.text.finish())
            job.post(Finished("length"))
            return False
        return True

    @staticmethod
    def _send(job: Job, text: str) -> None:
        if text:
            job.post(TextDelta(text))
