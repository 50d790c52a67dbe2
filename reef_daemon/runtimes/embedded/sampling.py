"""Choosing the next token, the log-prob the record keeps for it, and what a request that sets no sampling gets.

The log-prob is taken after temperature and before top-p filtering, the quantity a policy-gradient trainer
compares against. Temperature 0 means greedy decoding; its log-prob is then the model's own (temperature 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from reef_daemon.errors import BadRequest

SEED_MIN = -(2**63)  # a signed 64-bit whole number: what the record (SQLite) and the engines keep
SEED_MAX = 2**63 - 1


@dataclass(frozen=True)
class SamplingDefaults:
    """What decoding uses where a request sets nothing (`inference.temperature`, `.top-p`, `.max-tokens`); the bounds
    of every answer, whatever its request asks (`inference.max-answer-tokens`, `.max-answer-s`, `.repeat-stop-tokens`);
    and the most
    stop sequences a request may send, and their length (`inference.max-stop-sequences`, `.max-stop-chars`): every
    generated token is compared with each of them."""

    temperature: float
    top_p: float
    max_tokens: int
    max_answer_tokens: int = 1024
    max_answer_s: float = 120.0
    repeat_stop_tokens: int = 128
    max_stop_sequences: int = 16
    max_stop_chars: int = 500


@dataclass(frozen=True)
class SamplingParams:
    """What a request asks of decoding; `defaulted` names the fields it left to the defaults. `max_tokens` is held
    to the runtime's cap (`asked_max_tokens`: what the request asked, where the cap lowered it); an answer ends once
    it has taken `max_answer_s` seconds, or looped over one span for `repeat_stop_tokens` tokens (0: never)."""

    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    defaulted: tuple[str, ...] = ()
    asked_max_tokens: int | None = None
    max_answer_s: float = math.inf
    repeat_stop_tokens: int = 0

    @property
    def greedy(self) -> bool:
        """Temperature 0: the largest logit is taken."""
        return self.temperature == 0.0

    @classmethod
    def resolve(
        cls,
        defaults: SamplingDefaults,
        *,
        temperature: float | None,
        top_p: float | None,
        max_tokens: int | None,
        stop: tuple[str, ...] = (),
        seed: int | None = None,
    ) -> SamplingParams:
        """The request's own values where it set them, the defaults elsewhere; the length limit at most the cap."""
        given = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens}
        asked = defaults.max_tokens if max_tokens is None else max_tokens
        return cls(
            max_tokens=min(asked, defaults.max_answer_tokens),
            temperature=defaults.temperature if temperature is None else temperature,
            top_p=defaults.top_p if top_p is None else top_p,
            stop=stop,
            seed=seed,
            defaulted=tuple(name for name, value in given.items() if value is None),
            asked_max_tokens=asked if asked > defaults.max_answer_tokens else None,
            max_answer_s=defaults.max_answer_s,
            repeat_stop_tokens=defaults.repeat_stop_tokens,
        )

    def used(self) -> dict[str, Any]:
        """The sampling as recorded with the answer."""
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "defaulted": list(self.defaulted),
            **({"asked_max_tokens": self.asked_max_tokens} if self.asked_max_tokens is not None else {}),
        }

    def __post_init__(self) -> None:
        if self.seed is not None and not SEED_MIN <= self.seed <= SEED_MAX:
            raise BadRequest(f"seed must be a whole number from {SEED_MIN} to {SEED_MAX}")
        if self.max_tokens < 1:
            raise BadRequest("the maximum number of tokens must be at least 1")
        if not 0.0 <= self.temperature <= 2.0:
            raise BadRequest("temperature must be between 0 and 2")
        if not 0.0 < self.top_p <= 1.0:
            raise BadRequest("top_p must be greater than 0 and at most 1")


def new_generator(seed: int | None) -> torch.Generator:
    """A random stream per request: seeded requests repeat, others draw a fresh seed."""
    generator = torch.Generator()
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed)
    return generator


GreedyPicks = Callable[[torch.Tensor], list[tuple[int, float]]]  # logits [rows, vocab] -> each row's greedy pick


def pick_tokens(
    logits: torch.Tensor, params: Sequence[SamplingParams], generators: Sequence[torch.Generator],
    greedy: GreedyPicks | None = None, picked: Mapping[int, tuple[int, float]] | None = None,
) -> list[tuple[int, float]]:  # fmt: skip
    """(token id, log-prob) for each row of `logits` `[rows, vocab]`, row r as `params[r]` and `generators[r]` ask:
    `picked[r]` where the decoding step picked the row itself; the other greedy rows all at once through `greedy`
    where it is given (the decoding kernels' `pick_greedy`: the same token as `pick_token`, its log-prob within a
    few units in the last place), each of the rest by `pick_token`."""
    picks = dict(picked or {})
    greedy_rows = [row for row, asked in enumerate(params) if asked.greedy and row not in picks]
    if greedy is not None and greedy_rows:
        chosen = logits if len(greedy_rows) == len(params) else logits[greedy_rows]
        picks.update(zip(greedy_rows, greedy(chosen), strict=True))
    return [
        picks[row] if row in picks else pick_token(logits[row], asked, generator)
        for row, (asked, generator) in enumerate(zip(params, generators, strict=True))
    ]


def pick_token(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator) -> tuple[int, float]:
    """(token id, log-prob) from the last position's logits (a 1-D float tensor over the vocabulary)."""
    logits = logits.float()
    if params.greedy:
        log_probs = torch.log_softmax(logits, dim=-1)
        token = int(torch.argmax(logits))
        return token, float(log_probs[token])
    log_probs = torch.log_softmax(logits / params.temperature, dim=-1)
    probs = log_probs.exp()
    if params.top_p < 1.0:
        probs = _top_p(probs, params.top_p)
    token = int(torch.multinomial(probs, 1, generator=generator))
    return token, float(log_probs[token])


def _top_p(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose mass reaches `top_p` (always at least one)."""
    sorted_probs, order = torch.sort(probs, descending=True)
    mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
    sorted_probs[mass_before >= top_p] = 0.0
    kept = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return kept / kept.sum()
