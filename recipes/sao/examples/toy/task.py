"""The toy task: "What is the capital of <country>?", scored by a rule a client could run itself.

The reward is 1 when the reply names the capital and 0 otherwise. SmolLM2-135M-Instruct knows these capitals, but at
temperature 1 it often wanders off instead of saying so; a few dozen scored rollouts teach it to answer.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

QUESTION = "What is the capital of {country}? One word."
CAPITALS = {
    "France": "Paris",
    "Italy": "Rome",
    "Japan": "Tokyo",
    "Spain": "Madrid",
    "Germany": "Berlin",
    "England": "London",
    "Russia": "Moscow",
    "China": "Beijing",
    "Egypt": "Cairo",
    "Greece": "Athens",
    "Portugal": "Lisbon",
    "Ireland": "Dublin",
}
# Never trained on: the demo asks these before and after training to measure what the policy learned, not what
# it memorised.
HELD_OUT = ("Egypt", "Greece", "Ireland", "Portugal")
EVALUATION_SAMPLES = 4  # of each held-out question, the same seeds before and after and for both arms
MAX_TOKENS = 12  # "The capital of France is Paris." fits; a digression is cut here
# How the demo's daemons are configured (`reef serve --training.<key> <value>`): a learning rate high enough to
# move a 135M model within a few dozen single-rollout steps, a short critic warm-up, no checkpoints in the way.
SETTINGS = {
    "training.learning-rate": "1e-4",
    "training.critic-warmup-steps": "2",
    "training.checkpoint-every": "1000",
}
GRPO_SETTINGS = {**SETTINGS, "training.critic-warmup-steps": "0"}  # GRPO has no critic to warm up


@dataclass(frozen=True)
class Prompt:
    """One question and its checkable answer."""

    country: str

    @property
    def text(self) -> str:
        return QUESTION.format(country=self.country)

    @property
    def answer(self) -> str:
        return CAPITALS[self.country]


@dataclass(frozen=True)
class Rollout:
    """One request the demo sends: which prompt, and the sampling seed that makes it repeatable."""

    prompt: Prompt
    seed: int


def rollouts(seed: int, count: int, group: int) -> list[Rollout]:
    """`count` rollouts drawn from `seed`: each prompt asked `group` times in a row, one seed per request.

    SAO trains on each rollout alone; GRPO needs rollouts of the same prompt together, one group per step. Both
    arms of `reef demo sao --compare` get this same list.
    """
    draw = random.Random(seed)
    countries = sorted(set(CAPITALS) - set(HELD_OUT))
    planned: list[Rollout] = []
    while len(planned) < count:
        prompt = Prompt(draw.choice(countries))
        planned.extend(Rollout(prompt, draw.randrange(2**31)) for _ in range(group))
    return planned[:count]


def evaluation(seed: int, samples: int = EVALUATION_SAMPLES) -> list[Rollout]:
    """The held-out questions, `samples` of each with seeds drawn from `seed`: the same list before and after
    training, for both arms."""
    draw = random.Random(f"evaluation-{seed}")
    return [Rollout(Prompt(country), draw.randrange(2**31)) for country in HELD_OUT for _ in range(samples)]


def score(prompt: Prompt, reply: str) -> float:
    """1.0 when the reply names the capital (as a word, any case), else 0.0."""
    return 1.0 if re.search(rf"\b{re.escape(prompt.answer)}\b", reply, re.IGNORECASE) else 0.0
