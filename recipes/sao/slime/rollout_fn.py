"""Slime's rollout function for reef (`--rollout-function-path recipes.sao.slime.rollout_fn.generate_rollout`).

Runs inside Slime's RolloutManager actor, where Slime is importable; reef itself never imports this module's Slime
side. Each call waits for `--rollout-batch-size` eligible rollouts reef handed over (`spool.py`) and returns them as
one-sample groups.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from recipes.sao.slime.spool import take
from reef_contract import SLIME_SPOOL_ENV


def generate_rollout(args: Any, rollout_id: int, data_source: Any, evaluation: bool = False) -> Any:
    """`RolloutFnTrainOutput(samples=[[Sample], ...])` of the next batch reef scored (evaluation is not offered)."""
    base_types = importlib.import_module("slime.rollout.base_types")
    if evaluation:
        return base_types.RolloutFnEvalOutput(data={})
    sample_type = importlib.import_module("slime.utils.types").Sample
    fields = take(Path(os.environ[SLIME_SPOOL_ENV]), int(args.rollout_batch_size), rollout_id)
    samples = [[to_sample(sample_type, item)] for item in fields]
    return base_types.RolloutFnTrainOutput(samples=samples, metrics={"reef/rollouts": len(samples)})


def to_sample(sample_type: Any, fields: dict[str, Any]) -> Any:
    """A `Sample` from the fields reef wrote (`status` by its enum value)."""
    return sample_type(**{**fields, "status": sample_type.Status(fields["status"])})
