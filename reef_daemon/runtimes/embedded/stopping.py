"""When an answer ends, the same for every engine: an end-of-turn id, a stop sequence, the length limit, its time
limit, or a loop (the answer repeating one span, `repetition.py`).

An answer cut by one of reef's own bounds (inference.max-answer-tokens below what the request asked, the time limit,
a loop) ends as if the model had ended its turn (finish reason stop), its record's `cut` saying why: an agent told
`length` asks the model to go on, and a small model that loops would loop again until the agent gives up.

Each generated token is handed to `take` after it is recorded; it sends the token's text and finishes the job when
the token ends the answer.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from reef_daemon.runtimes.embedded.job import Finished, Job, TextDelta


@dataclass(frozen=True)
class StopRules:
    """The ids that end the assistant's turn, and the most positions (prompt and answer) the model reads."""

    end_ids: frozenset[int]
    context_length: int

    def take(self, job: Job, token: int) -> bool:
        """Send the token's text; finish the job at an end-of-turn id, a stop sequence, the length or time limit or
        a loop. False once the job is finished."""
        if token in self.end_ids:
            send_text(job, job.text.finish())
            job.post(Finished("stop"))
            return False
        send_text(job, job.text.add(token))
        if job.text.stopped_by is not None:
            job.post(Finished("stop", stop_sequence=job.text.stopped_by))
            return False
        used = len(job.prompt_ids) + len(job.output_ids)
        cut = _cut(job)
        if cut is None and (len(job.output_ids) >= job.params.max_tokens or used >= self.context_length):
            send_text(job, job.text.finish())
            job.post(Finished("length"))
            return False
        if cut is not None:
            send_text(job, job.text.finish())
            job.post(Finished("stop", cut=cut))
            return False
        return True


def _cut(job: Job) -> str | None:
    """Why one of reef's own bounds ends the answer at its newest token, or None."""
    params = job.params
    period = job.repeats.add(job.output_ids)
    if period is not None:
        return job.repeats.explain(period)
    if params.asked_max_tokens is not None and len(job.output_ids) >= params.max_tokens:
        return (
            f"the answer reached {params.max_tokens} tokens, the most one may have (inference.max-answer-tokens); "
            f"its request asked for {params.asked_max_tokens}"
        )
    if time.monotonic() >= job.deadline:
        return f"the answer took {params.max_answer_s:g} s, the most one may (inference.max-answer-s)"
    return None


def end_ids(tokenizer: Any, generation_config: Any) -> frozenset[int]:
    """Token ids that end the assistant's turn: the tokenizer's end id and the model's generation config's."""
    ids: set[int] = set()
    for value in (tokenizer.eos_token_id, getattr(generation_config, "eos_token_id", None)):
        ids.update(_ints(value))
    return frozenset(ids)


def _ints(value: Any) -> Iterable[int]:
    if isinstance(value, int):
        return (value,)
    if isinstance(value, list):
        return (v for v in value if isinstance(v, int))
    return ()


def send_text(job: Job, text: str) -> None:
    """Hand new answer text to the job's reader (nothing when empty)."""
    if text:
        job.post(TextDelta(text))
