"""Reef's side of the Slime contract: a scored rollout as Slime `Sample` fields, the `train.py` flags built from
`[training]`, the processes and ports reef starts, the rollout hand-over, and refusals when Slime cannot run here."""

from __future__ import annotations

import importlib
import itertools
import json
import subprocess
import sys
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import pytest

from recipes.sao.rollout import Rollout
from recipes.sao.settings import TrainingSection, training_of
from recipes.sao.slime.contract import JOB_ID, ROLLOUT_FUNCTION, check_ready, plan_run, sample_fields, slime_flags
from recipes.sao.slime.rollout_fn import to_sample
from recipes.sao.slime.spool import hand_over, next_index, take
from reef_contract import SAO_LAMBDA_ALPHA_ENV, SLIME_SPOOL_ENV
from reef_daemon.setting_kinds import SettingsError
from reef_daemon.settings import load_settings

ROLLOUT = Rollout(
    record_id="rec1",
    report_id="rep1",
    prompt_ids=(1, 2, 3),
    output_ids=(4, 5),
    logprobs=(-0.1, -0.2),
    versions=("inc:3", "inc:3"),
    reward=0.75,
    group="1,2,3",
)


@dataclass
class SlimeSample:
    """The fields of Slime's `slime.utils.types.Sample` (THUDM/slime 624b824a) that reef fills, and its Status."""

    class Status(Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"
        FAILED = "failed"

    group_index: int | None = None
    index: int | None = None
    tokens: list[int] = field(default_factory=list)
    response_length: int = 0
    reward: float | None = None
    loss_mask: list[int] | None = None
    weight_versions: list[str] = field(default_factory=list)
    rollout_log_probs: list[float] | None = None
    status: Status = Status.PENDING
    metadata: dict[str, Any] = field(default_factory=dict)


def settings(tmp_path: Path, **overrides: str) -> Any:
    base = {
        "reef.state-dir": str(tmp_path / "state"),
        "recipe": "sao",
        "training.trainer": "slime",
        "embedded.engine": "sglang",
        "inference.model-path": str(tmp_path / "model"),
        "slime.path": str(tmp_path / "slime"),
    }
    return load_settings(overrides={**base, **overrides}, environ={})


def flag_values(flags: list[str]) -> dict[str, str]:
    return {flag: value for flag, value in itertools.pairwise(flags) if flag.startswith("--")}


def test_a_rollout_becomes_an_aligned_slime_sample() -> None:
    fields = sample_fields(ROLLOUT, 7)
    sample = to_sample(SlimeSample, fields)
    assert sample.tokens == [1, 2, 3, 4, 5] and sample.response_length == 2
    assert sample.loss_mask == [1, 1] and sample.rollout_log_probs == [-0.1, -0.2]
    assert sample.reward == 0.75 and sample.weight_versions == ["inc:3", "inc:3"]
    assert sample.status is SlimeSample.Status.COMPLETED and sample.index == sample.group_index == 7
    assert sample.metadata["reef_record_id"] == "rec1"
    json.dumps(fields)  # written to the spool as JSON


def test_flags_carry_saos_loss_settings_from_training(tmp_path: Path) -> None:
    chosen = settings(tmp_path, **{"training.batch-size": "4", "training.critic-warmup-steps": "10"})
    flags = slime_flags(chosen, tmp_path / "work")
    values = flag_values(flags)
    assert values["--advantage-estimator"] == "ppo"  # the critic
    assert "--use-rollout-logprobs" in flags
    assert (values["--eps-clip"], values["--eps-clip-high"]) == ("0.3", "5.0")  # DIS, explicit on both sides
    assert values["--kl-coef"] == "0" and "--use-kl-loss" not in flags
    assert values["--n-samples-per-prompt"] == "1"
    assert values["--rollout-batch-size"] == values["--global-batch-size"] == "4"
    assert values["--num-critic-only-steps"] == "10"
    assert values["--value-clip"] == "0.2" and values["--clip-grad"] == "1.0"
    assert values["--hf-checkpoint"] == str(tmp_path / "model")
    assert values["--megatron-config-path"] == str(tmp_path / "work" / "megatron.yaml")
    assert "--use-tis" in flags  # DIS's hard mask, and SAO's length-adaptive GAE, as Slime hooks
    hooks = ("--rollout-function-path", "--custom-tis-function-path", "--custom-advantage-function-path")
    assert values["--rollout-function-path"] == ROLLOUT_FUNCTION
    for hook in hooks:  # Slime loads each by its dotted path
        module, name = values[hook].rsplit(".", 1)
        assert callable(getattr(importlib.import_module(module), name)), hook


def test_processes_and_ports_reef_starts(tmp_path: Path) -> None:
    chosen = settings(tmp_path, **{"slime.actor-gpus": "1", "slime.rollout-gpus": "1", "embedded.sglang-port": "30000"})
    plan = plan_run(chosen, Path("/reef"), "10.0.0.5")
    head, job = plan.processes
    assert head.argv[:3] == ("ray", "start", "--head") and flag_values(list(head.argv))["--num-gpus"] == "2"
    assert job.argv[:3] == ("ray", "job", "submit") and flag_values(list(job.argv))["--submission-id"] == JOB_ID
    environment = json.loads(flag_values(list(job.argv))["--runtime-env-json"])["env_vars"]
    assert environment == {"PYTHONPATH": "/reef", SLIME_SPOOL_ENV: str(plan.spool), SAO_LAMBDA_ALPHA_ENV: "1.5"}
    trainer = list(job.argv).index("--") + 1
    assert job.argv[trainer : trainer + 2] == ("python3", str(tmp_path / "slime" / "train.py"))
    assert plan.ports == {
        "ray": 6379,
        "ray-dashboard": 8265,
        "sglang-router": 30000,
        "sglang-engines-from": 15000,
        "reef": 8900,
    }
    assert plan.router_url == "http://10.0.0.5:30000"
    assert plan.stop[0][:3] == ("ray", "job", "stop") and plan.stop[-1] == ("ray", "stop")
    roles = {entry["role"]: entry["overrides"]["lr"] for entry in plan.megatron_config["megatron"]}
    assert roles == {"actor": 1e-6, "critic": 5e-6}  # the original's, for a full-model critic


def test_a_slime_run_takes_the_originals_defaults_for_what_is_not_set(tmp_path: Path) -> None:
    unset = training_of(settings(tmp_path))
    assert (unset.learning_rate, unset.critic_learning_rate, unset.critic_warmup_steps) == (1e-6, 5e-6, 10)
    chosen = training_of(settings(tmp_path, **{"training.learning-rate": "2e-6", "training.critic-warmup-steps": "3"}))
    assert (chosen.learning_rate, chosen.critic_learning_rate, chosen.critic_warmup_steps) == (2e-6, 5e-6, 3)
    torch_trainer = load_settings(overrides={"recipe": "sao"}, environ={})
    assert training_of(torch_trainer) == TrainingSection(learning_rate=1e-4)  # the CPU head's, a LoRA adapter's rate
    full = load_settings(overrides={"recipe": "sao", "training.adapter": "full"}, environ={})
    assert training_of(full) == TrainingSection(adapter="full")
    assert TrainingSection().critic_learning_rate <= 1e-4


def test_a_critic_learning_rate_a_full_model_critic_cannot_take_is_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"critic-learning-rate = 0\.001 is too high for the full-model critic"):
        training_of(settings(tmp_path, **{"training.critic-learning-rate": "1e-3"}))


def test_reef_serve_refuses_a_slime_critic_lr_too_high_before_anything_starts(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "reef_cli", "serve", "--reef.port", "0", "--reef.state-dir", str(tmp_path / "s")]
    args = ["--recipe", "sao", "--training.trainer", "slime", "--training.critic-learning-rate", "1e-3"]
    result = subprocess.run([*command, *args], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "is too high for the full-model critic a Slime run trains" in result.stderr


def test_rollouts_are_handed_over_once_each_in_order(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    hand_over(spool, [sample_fields(ROLLOUT, 0)])
    waits: list[float] = []

    def more_arrive(_seconds: float) -> None:  # the second rollout is scored while Slime waits
        waits.append(_seconds)
        hand_over(spool, [sample_fields(ROLLOUT, 1), sample_fields(ROLLOUT, 2)])

    taken = take(spool, 2, rollout_id=0, wait=more_arrive)
    assert [sample["index"] for sample in taken] == [0, 1] and len(waits) == 1
    assert [sample["index"] for sample in take(spool, 1, rollout_id=1)] == [2]
    assert not list((spool / "pending").glob("*.json")) and next_index(spool) == 3


def test_a_slime_run_that_cannot_start_here_is_refused_with_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"cannot start here; missing: Slime \(install Slime from its repository"):
        check_ready(settings(tmp_path))


def test_reef_serve_refuses_slime_without_a_traceback(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "reef_cli", "serve", "--reef.port", "0", "--reef.state-dir", str(tmp_path / "s")]
    args = ["--recipe", "sao", "--training.trainer", "slime", "--embedded.engine", "sglang"]
    result = subprocess.run([*command, *args], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2
    assert "training.trainer = slime cannot start here; missing: Slime" in result.stderr
    assert "SGLang (pip install -e '.[embedded,gpu]')" in result.stderr and "CUDA GPUs" in result.stderr
    assert "Traceback" not in result.stderr
