"""The weight recipes' settings (sao, grpo): the `training` section, and the `slime` section of a Slime run.

Declared here, apart from the recipe (which loads torch), so that `reef serve --help` lists them cheaply.

The defaults are the CPU torch trainer's: a linear value head on unit-RMS hidden states learns at 1e-4 (a step moves
a value by at most about lr x hidden size, ~0.06 for the embedded model), and the policy's top layers at 1e-5. A Slime
run trains a full-model critic, and there every training setting left unset takes the original's value instead
(`training_of`): policy lr 1e-6, critic lr 5e-6, 10 critic-only warm-up steps; a critic lr above
FULL_MODEL_CRITIC_LR_MAX is refused there.

`training.adapter` says what a step changes: `lora` (the default) trains a LoRA adapter per scenario on the frozen
base (rank, alpha, dropout and target modules as settings), so several scenarios train on one daemon and a version
is a few MB; `full` trains the top decoder blocks of one scenario, as reef did before adapters. An adapter starts
at zero and learns at a larger rate than the full weights: with `lora` and the torch trainer, a policy learning
rate left unset is LORA_LEARNING_RATE.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reef_contract import MAX_STALENESS_ENV, SAO_BATCH_SIZE_ENV
from reef_daemon.setting_kinds import (  # the settings' vocabulary alone: `reef serve --help` loads no recipe
    COUNT,
    FRACTION,
    OPTIONAL_PATH,
    PORT,
    POSITIVE_INT,
    POSITIVE_NUMBER,
    TOKENS,
    Kind,
    SettingsError,
    one_of,
    setting,
)

if TYPE_CHECKING:
    from reef_daemon.recipe_api import Settings

TRAINER = one_of("TRAINER", "torch", "slime")
ADAPTER = one_of("ADAPTER", "lora", "full")


def _parse_dropout(value: object) -> float:
    number = float(value) if isinstance(value, int | float | str) and not isinstance(value, bool) else float("nan")
    if not 0 <= number < 1:
        raise ValueError("expected a number from 0 up to (not including) 1")
    return number


DROPOUT = Kind("NUMBER", _parse_dropout)
DEVICE = one_of("DEVICE", "auto", "cpu", "cuda")


@dataclass(frozen=True)
class TrainingSection:
    """Knobs of the weight recipes (sao, grpo); the record and harness recipes ignore them."""

    batch_size: int = setting(1, POSITIVE_INT, env=SAO_BATCH_SIZE_ENV, help="rollouts per step")
    learning_rate: float = setting(
        1e-5, POSITIVE_NUMBER, help="policy learning rate (Adam; a LoRA adapter: 1e-4; Slime: 1e-6)"
    )
    critic_learning_rate: float = setting(
        1e-4, POSITIVE_NUMBER, help="critic learning rate (Adam; the value head on unit-RMS hidden states; Slime: 5e-6)"
    )
    critic_steps: int = setting(2, POSITIVE_INT, help="critic updates per step (Slime runs one per step)")
    critic_warmup_steps: int = setting(2, COUNT, help="critic-only steps before the policy first moves (Slime: 10)")
    value_clip: float = setting(
        0.2, POSITIVE_NUMBER, help="a critic update moves a value at most this far from the value read before it"
    )
    max_grad_norm: float = setting(1.0, POSITIVE_NUMBER, help="gradient-norm clipping of the policy and the critic")
    max_staleness: int = setting(
        0, COUNT, env=MAX_STALENESS_ENV, help="how many weight versions old a rollout a person scored may be"
    )
    derived_staleness: int = setting(
        4,
        COUNT,
        help="how many weight versions old a rollout scored by a derived report (words, retry, judge:"
        " any source but a person), or a person's correction of one, may be (never less than max-staleness)",
    )
    dis_low: float = setting(0.3, FRACTION, help="tokens with ratio <= 1 - dis-low are masked")
    dis_high: float = setting(5.0, POSITIVE_NUMBER, help="tokens with ratio >= 1 + dis-high are masked")
    lambda_alpha: float = setting(1.5, POSITIVE_NUMBER, help="length-adaptive GAE: lambda = 1 - 1/(a*L)")
    checkpoint_every: int = setting(
        10, POSITIVE_INT, help="save a checkpoint release every N steps (a LoRA adapter: every version is one)"
    )
    trainer: str = setting(
        "torch",
        TRAINER,
        help="what trains: torch (in this process) or slime (a Slime job on Ray, pushing weights into SGLang)",
    )
    device: str = setting("auto", DEVICE, help="torch trainer: cuda, cpu, or auto (cuda when a GPU is present)")
    adapter: str = setting(
        "lora",
        ADAPTER,
        help="what a step trains: lora (an adapter per scenario on the frozen base) or full (the top layers)",
    )
    lora_rank: int = setting(8, POSITIVE_INT, help="LoRA rank r of each adapted layer")
    lora_alpha: int = setting(16, POSITIVE_INT, help="LoRA alpha: the adapter's output is scaled by alpha / r")
    lora_dropout: float = setting(0.0, DROPOUT, help="dropout on the adapter's input while training")
    lora_target_modules: tuple[str, ...] = setting(
        ("q_proj", "k_proj", "v_proj", "o_proj"), TOKENS, help="the linear layers (by name) an adapter adapts"
    )


@dataclass(frozen=True)
class SlimeSection:
    """The Slime training job (training.trainer = slime): where Slime is, and the GPUs and ports it takes."""

    path: Path | None = setting(None, OPTIONAL_PATH, help="the Slime checkout holding train.py")
    actor_gpus: int = setting(1, POSITIVE_INT, help="GPUs of the Megatron actor (the critic shares them)")
    rollout_gpus: int = setting(1, POSITIVE_INT, help="GPUs of the SGLang engines Slime starts")
    num_rollout: int = setting(1000, POSITIVE_INT, help="training steps the Slime job runs before it ends")
    ray_port: int = setting(6379, PORT, help="port of the Ray head reef starts")
    ray_dashboard_port: int = setting(8265, PORT, help="port of the Ray dashboard (jobs are submitted through it)")
    model_args: tuple[str, ...] = setting(
        (), TOKENS, help="Megatron architecture flags Slime needs for the model (e.g. --num-layers 28 ...)"
    )


# What a full-model critic trains at in the original, and ten times that: above it a Slime run is refused.
ORIGINAL_FULL_MODEL: dict[str, Any] = {"learning_rate": 1e-6, "critic_learning_rate": 5e-6, "critic_warmup_steps": 10}
FULL_MODEL_CRITIC_LR_MAX = 5e-5
LORA_LEARNING_RATE = 1e-4  # the policy rate of an adapter when none is set


def training_of(settings: Settings) -> TrainingSection:
    """The `training` section as the trainer uses it: with training.trainer = slime (a full-model critic), the
    original's values for what was not set, and SettingsError for a critic learning rate it cannot take; with a
    LoRA adapter, LORA_LEARNING_RATE for a policy learning rate not set."""
    training = settings.of(TrainingSection)
    if training.trainer != "slime":
        if training.adapter == "lora" and "training.learning-rate" not in settings.sources:
            training = dataclasses.replace(training, learning_rate=LORA_LEARNING_RATE)
        return training
    unset = {
        name: value
        for name, value in ORIGINAL_FULL_MODEL.items()
        if f"training.{name.replace('_', '-')}" not in settings.sources
    }
    training = dataclasses.replace(training, **unset)
    if training.critic_learning_rate > FULL_MODEL_CRITIC_LR_MAX:
        raise SettingsError(
            f"training.critic-learning-rate = {training.critic_learning_rate:g} is too high for the full-model critic"
            f" a Slime run trains (at most {FULL_MODEL_CRITIC_LR_MAX:g}, ten times the original's 5e-6; the CPU"
            " default 1e-4 is for a linear value head): leave it unset for 5e-6"
        )
    return training


SETTINGS_SECTIONS: dict[str, type[Any]] = {"training": TrainingSection, "slime": SlimeSection}
