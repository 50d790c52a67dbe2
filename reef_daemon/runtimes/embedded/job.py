"""One request's generation as both sides see it: the worker thread fills it, the event loop reads it."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reef_daemon.runtimes.embedded.repetition import RepetitionWatch
from reef_daemon.runtimes.embedded.sampling import SamplingParams, new_generator
from reef_daemon.runtimes.embedded.text import TextAssembler

if TYPE_CHECKING:
    from reef_daemon.runtimes.embedded.adapters import LoraAdapter


@dataclass(frozen=True)
class TextDelta:
    """New answer text, ready to send."""

    text: str


@dataclass(frozen=True)
class Finished:
    """The end of generation. `reason`: stop (end of turn or a stop sequence), length, cancelled or error; `cut`
    says which of reef's own bounds ended an answer the model had not ended (a `stop`): the answer cap, the time
    limit, a loop."""

    reason: str
    stop_sequence: str | None = None
    error: str | None = None
    cut: str | None = None


Event = TextDelta | Finished


@dataclass(eq=False)
class Job:
    """A prompt being answered. Token data is written only by the worker thread, and read after `Finished`."""

    prompt_ids: list[int]
    params: SamplingParams
    text: TextAssembler
    loop: asyncio.AbstractEventLoop
    admitted_version: str
    events: asyncio.Queue[Event] = field(default_factory=asyncio.Queue)
    output_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)
    adapters: list[str | None] = field(default_factory=list)  # the scenario whose adapter served each token
    scenario: str | None = None  # served by this scenario's LoRA adapter, where it has one
    finished: Finished | None = None
    cancelled: bool = False
    # Worker-side decoding state: the KV cache, and the ids not yet fed through the model.
    cache: Any = None
    adapter: LoraAdapter | None = None  # the adapter reading the context; None: the base
    pending: list[int] = field(default_factory=list)
    reached_loop: bool = False  # an event of the job has been handed to the event loop (worker thread only)

    def __post_init__(self) -> None:
        self.generator = new_generator(self.params.seed)
        self.repeats = RepetitionWatch(self.params.repeat_stop_tokens)
        self.deadline = time.monotonic() + self.params.max_answer_s  # the answer ends here, whatever its length

    def record(self, token: int, logprob: float, version: str, adapter: str | None = None) -> None:
        self.output_ids.append(token)
        self.logprobs.append(logprob)
        self.versions.append(version)
        self.adapters.append(adapter)

    def post(self, event: Event) -> None:
        """Hand an event to the event loop (called from the worker thread); inside `delivered_together`, with the
        other events of the same pass."""
        if isinstance(event, Finished):
            self.finished = event
        pending = getattr(_PASS, "pending", None)
        if pending is not None:
            pending.append((self, event))
            return
        _deliver_soon(self.loop, [(self, event)])

    def token_data(self) -> dict[str, Any]:
        return {
            "prompt_ids": list(self.prompt_ids),
            "output_ids": list(self.output_ids),
            "logprobs": list(self.logprobs),
            "versions": list(self.versions),
            "adapters": list(self.adapters),
            "sampling": self.params.used(),
            **({"cut": self.finished.cut} if self.finished is not None and self.finished.cut else {}),
        }

    @property
    def last_version(self) -> str:
        return self.versions[-1] if self.versions else self.admitted_version


_PASS = threading.local()


@contextlib.contextmanager
def delivered_together(held: list[tuple[Job, Event]] | None = None) -> Iterator[None]:
    """The events jobs post inside the block reach the event loop in one wake-up at its end, not one each: a decode
    step of a batch of sequences gives a token to every one of them at once. With `held`, they are added to it
    instead, for `deliver` to hand over later."""
    pending: list[tuple[Job, Event]] = [] if held is None else held
    _PASS.pending = pending
    try:
        yield
    finally:
        _PASS.pending = None
        if held is None:
            deliver(pending)


def deliver(events: list[tuple[Job, Event]]) -> None:
    """Hand `events` (posted in a `delivered_together` block) to their event loops, one wake-up per loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Job, Event]]] = {}
    for job, event in events:
        by_loop.setdefault(job.loop, []).append((job, event))
    for loop, together in by_loop.items():
        _deliver_soon(loop, together)


def _deliver_soon(loop: asyncio.AbstractEventLoop, events: list[tuple[Job, Event]]) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is waiting any more
        loop.call_soon_threadsafe(_deliver, events)


def _deliver(events: list[tuple[Job, Event]]) -> None:
    for job, event in events:
        job.events.put_nowait(event)
