"""The toy task: "What is the capital of <country>?", scored by a rule a client could run itself.

The reward is 1 when the reply names the capital and 0 otherwise. SmolLM2-135M-Instruct knows many of these capitals,
but at temperature 1 it often wanders off instead of saying so; a few dozen scored rollouts teach it to answer.
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
    "Austria": "Vienna",
    "Norway": "Oslo",
    "Sweden": "Stockholm",
    "Denmark": "Copenhagen",
    "the Netherlands": "Amsterdam",
    "Belgium": "Brussels",
    "Hungary": "Budapest",
    "the Czech Republic": "Prague",
    "Iran": "Tehran",
    "Iraq": "Baghdad",
    "India": "Delhi",
    "Vietnam": "Hanoi",
    "South Korea": "Seoul",
    "Indonesia": "Jakarta",
}
# The pass rate of each question on the model as first served, 16 answers each at temperature 1 with max_tokens 12
# (bench/sao_base_rates.py, 2026-12-02; Poland, Finland, Turkey and Thailand scored 0.00 and were dropped, since a
# question never answered right teaches nothing): 0.06 Egypt, Austria, the
# Netherlands, Belgium, the Czech Republic, Iraq, India, Vietnam; 0.12 France, Italy, Japan, Spain, Greece, Ireland,
# Norway, Sweden, Denmark, Hungary, Iran; 0.19 Germany, Russia, Indonesia; 0.25 Portugal, South Korea; 0.31 England;
# 0.38 China.
# Never trained on: the demo asks these before and after training to measure what the policy learned, not what
# it memorised. Chosen once from the rates above: twelve questions the model as served answers right 5 % to 60 % of
# the time (12 % to 25 %, 0.15 on average), so that a change either way can show; the other 14 are for training.
HELD_OUT = (
    "Greece", "Ireland", "Portugal", "Norway", "Sweden", "Denmark",
    "Hungary", "Iran", "Indonesia", "South Korea", "Japan", "Spain",
)  # fmt: skip
EVALUATION_SAMPLES = 8  # of each held-out question, the same seeds before and after and for every arm
PROMPTS = 8  # distinct training questions per run
GROUP = 4  # GRPO's group: rollouts of one question per step; every arm gets PROMPTS x GROUP rollouts
MAX_TOKENS = 12  # "The capital of France is Paris." fits; a digression is cut here
# How the demo's daemons are configured (`reef serve --training.<key> <value>`): full weights (what its figures in
# README were measured with; a LoRA adapter is the serving default), a policy learning rate high enough to move a
# 135M model within a few dozen single-rollout steps; no checkpoints in the way. The critic keeps its defaults
# (zero-initialised, lr 1e-4, two updates a step, two warm-up steps).
SETTINGS = {
    "training.adapter": "full",
    "training.learning-rate": "1e-4",
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


def training_countries() -> list[str]:
    """The questions training draws from: every country but the held-out ones."""
    return sorted(set(CAPITALS) - set(HELD_OUT))


def rollouts(seed: int, prompts: int = PROMPTS, group: int = GROUP, *, grouped: bool) -> list[Rollout]:
    """`prompts` distinct training questions drawn from `seed`, each asked `group` times with its own sampling seed:
    the same requests for every arm, in two orders. `grouped` (GRPO): each question's `group` rollouts in a row, one
    group per step. Otherwise (SAO) round-robin, P1 P2 ... Pn P1 P2 ...: one rollout per question at a time, never the
    same question twice in a row."""
    draw = random.Random(seed)
    chosen = draw.sample(training_countries(), prompts)
    asked = [[Rollout(Prompt(country), draw.randrange(2**31)) for _ in range(group)] for country in chosen]
    if grouped:
        return [rollout for rollouts_of in asked for rollout in rollouts_of]
    return [asked[prompt][turn] for turn in range(group) for prompt in range(prompts)]


def evaluation(seed: int, samples: int = EVALUATION_SAMPLES) -> list[Rollout]:
    """The held-out questions, `samples` of each with seeds drawn from `seed`: the same list before and after
    training, for every arm."""
    draw = random.Random(f"evaluation-{seed}")
    return [Rollout(Prompt(country), draw.randrange(2**31)) for country in HELD_OUT for _ in range(samples)]


def score(prompt: Prompt, reply: str) -> float:
    """1.0 when the reply names the capital (as a word, any case), else 0.0."""
    return 1.0 if re.search(rf"\b{re.escape(prompt.answer)}\b", reply, re.IGNORECASE) else 0.0
