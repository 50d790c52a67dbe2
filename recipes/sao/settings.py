"""The weight recipes' settings (sao, grpo): the `training` section, and the `slime` section of a Slime run.

Declared here, apart from the recipe (which loads torch), so that `reef serve --help` lists them cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reef_daemon.contract import MAX_STALENESS_ENV, SAO_BATCH_SIZE_ENV
from reef_daemon.recipe_api import (
    COUNT,
    FRACTION,
    OPTIONAL_PATH,
    PORT,
    POSITIVE_INT,
    POSITIVE_NUMBER,
    TOKENS,
    one_of,
    setting,
)

TRAINER = one_of("TRAINER", "torch", "slime")
DEVICE = one_of("DEVICE", "auto", "cpu", "cuda")


@dataclass(frozen=True)
class TrainingSection:
    """Knobs of the weight recipes (sao, grpo); the record and harness recipes ignore them."""

    batch_size: int = setting(1, POSITIVE_INT, env=SAO_BATCH_SIZE_ENV, help="rollouts per step")
    learning_rate: float = setting(1e-5, POSITIVE_NUMBER, help="policy learning rate (Adam)")
    critic_learning_rate: float = setting(1e-3, POSITIVE_NUMBER, help="value head learning rate (Adam)")
    critic_steps: int = setting(2, POSITIVE_INT, help="critic updates per step")
    critic_warmup_steps: int = setting(2, COUNT, help="critic-only steps before the policy moves")
    max_staleness: int = setting(0, COUNT, env=MAX_STALENESS_ENV, help="how many weight versions old a rollout may be")
    dis_low: float = setting(0.3, FRACTION, help="tokens with ratio <= 1 - dis-low are masked")
    dis_high: float = setting(5.0, POSITIVE_NUMBER, help="tokens with ratio >= 1 + dis-high are masked")
    lambda_alpha: float = setting(1.5, POSITIVE_NUMBER, help="length-adaptive GAE: lambda = 1 - 1/(a*L)")
    checkpoint_every: int = setting(10, POSITIVE_INT, help="save a checkpoint release every N steps")
    trainer: str = setting(
        "torch",
        TRAINER,
        help="what trains: torch (in this process) or slime (a Slime job on Ray, pushing weights into SGLang)",
    )
    device: str = setting("auto", DEVICE, help="torch trainer: cuda, cpu, or auto (cuda when a GPU is present)")


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


SETTINGS_SECTIONS: dict[str, type[Any]] = {"training": TrainingSection, "slime": SlimeSection}
