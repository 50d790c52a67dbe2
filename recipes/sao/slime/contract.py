"""Reef's side of the Slime contract (Slime at THUDM/slime 624b824a, over SGLang 0.5.15).

- **Samples.** Each eligible scored rollout becomes the fields of one `slime.utils.types.Sample`: `tokens` (prompt
  then answer ids), `response_length`, `loss_mask` (ones over the answer), `rollout_log_probs`, `reward`,
  `weight_versions`, `status`, a unique `index` and `group_index`; `metadata` names the reef record.
- **Flags.** Slime's `train.py` flags from `[training]`: SAO's loss is PPO with a critic (`--advantage-estimator ppo`),
  the ratio taken against the recorded log-probs (`--use-rollout-logprobs`), the DIS band as the clip band
  (`--eps-clip` 0.3, `--eps-clip-high` 5.0; explicit, since Slime otherwise makes the band symmetric) plus DIS's hard
  mask and SAO's length-adaptive GAE as Slime hooks (`hooks.py`), no KL (`--kl-coef 0`, no `--use-kl-loss`), one
  rollout per prompt, `batch-size` rollouts per step, value clipping (`--value-clip`) and gradient-norm clipping
  (`--clip-grad`). Slime has no critic learning-rate flag; the critic's comes from a `--megatron-config-path` file
  (role `critic`). Slime trains its critic once per actor step (it has no flag for more). The training settings left
  unset take the original's values for a full-model critic (`settings.training_of`). Slime drops unknown flags
  silently, so only flags that exist in that version are built.
- **Processes and ports.** Reef starts a Ray head (`ray.port`, dashboard `ray.dashboard-port`) and submits
  `train.py` as a Ray job; Slime starts the SGLang engines (each takes consecutive ports from 15000) and their
  router on `embedded.sglang-port`, which reef's sglang engine attaches to. Slime pushes weights into the engines
  itself after each step (pause, transfer over NCCL, continue) under versions 1, 2, ...
"""

from __future__ import annotations

import importlib.util
import json
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recipes.sao.rollout import Rollout
from recipes.sao.settings import SlimeSection, training_of
from reef_contract import SAO_LAMBDA_ALPHA_ENV, SLIME_SPOOL_ENV
from reef_daemon.recipe_api import Settings, SettingsError

ROLLOUT_FUNCTION = "recipes.sao.slime.rollout_fn.generate_rollout"
DIS_MASK_FUNCTION = "recipes.sao.slime.hooks.dis_mask"
ADVANTAGE_FUNCTION = "recipes.sao.slime.hooks.sao_advantages"
JOB_ID = "reef-sao"
ENGINE_FIRST_PORT = 15000  # Slime's SGLang engines take consecutive ports from here
SLIME_INSTALL_HINT = (
    "install Slime from its repository (the PyPI package named slime is unrelated): use the slimerl/slime Docker image,"
    " or git clone https://github.com/THUDM/slime && pip install -e slime --no-deps, and set slime.path to the"
    " checkout"
)


def sample_fields(rollout: Rollout, index: int) -> dict[str, Any]:
    """The `Sample` fields of one scored rollout (`index` unique within the run)."""
    answer = len(rollout.output_ids)
    return {
        "index": index,
        "group_index": index,  # one rollout per prompt: every sample is its own group
        "tokens": [*rollout.prompt_ids, *rollout.output_ids],
        "response_length": answer,
        "loss_mask": [1] * answer,
        "rollout_log_probs": list(rollout.logprobs),
        "reward": rollout.reward,
        "weight_versions": list(rollout.versions),
        "status": "completed",
        "metadata": {"reef_record_id": rollout.record_id, "reef_report_id": rollout.report_id},
    }


def megatron_config(settings: Settings) -> dict[str, Any]:
    """The role overrides file (`--megatron-config-path`): the critic learns at its own rate."""
    training = training_of(settings)
    return {
        "megatron": [
            {"name": "default", "role": "actor", "overrides": {"lr": training.learning_rate}},
            {"name": "default", "role": "critic", "overrides": {"lr": training.critic_learning_rate}},
        ]
    }


def slime_flags(settings: Settings, work: Path) -> list[str]:
    """`train.py`'s command-line flags for SAO from the settings; `work` is the run's folder (checkpoints, config)."""
    training, slime, embedded = training_of(settings), settings.of(SlimeSection), settings.embedded
    model = str(settings.inference.model_path.resolve()) if settings.inference.model_path else ""
    work = work.resolve()
    batch = str(training.batch_size)
    return [
        # the model, and where Megatron and Hugging Face checkpoints go
        "--hf-checkpoint", model,
        "--ref-load", model,
        "--load", str(work / "checkpoints"),
        "--save", str(work / "checkpoints"),
        "--save-interval", str(training.checkpoint_every),
        "--save-hf", str(work / "hf" / "step_{rollout_id}"),
        # data: reef's eligible rollouts, one per prompt, batch-size of them per step
        "--rollout-function-path", ROLLOUT_FUNCTION,
        "--disable-rollout-global-dataset",
        "--num-rollout", str(slime.num_rollout),
        "--n-samples-per-prompt", "1",
        "--rollout-batch-size", batch,
        "--global-batch-size", batch,
        # SAO: a critic, the ratio against the rollout's log-probs inside the DIS band, no KL
        "--advantage-estimator", "ppo",
        "--num-critic-only-steps", str(training.critic_warmup_steps),
        "--value-clip", str(training.value_clip),
        "--clip-grad", str(training.max_grad_norm),
        "--custom-advantage-function-path", ADVANTAGE_FUNCTION,
        "--use-rollout-logprobs",
        "--eps-clip", str(training.dis_low),
        "--eps-clip-high", str(training.dis_high),
        "--use-tis",
        "--custom-tis-function-path", DIS_MASK_FUNCTION,
        "--kl-coef", "0",
        "--entropy-coef", "0",
        "--lr", str(training.learning_rate),
        "--megatron-config-path", str(work / "megatron.yaml"),
        # GPUs: the actor (and the critic beside it), and the SGLang engines reef serves from
        "--actor-num-nodes", "1",
        "--actor-num-gpus-per-node", str(slime.actor_gpus),
        "--rollout-num-gpus", str(slime.rollout_gpus),
        "--rollout-num-gpus-per-engine", str(embedded.sglang_tp),
        "--sglang-router-port", str(embedded.sglang_port),
        "--sglang-mem-fraction-static", str(embedded.sglang_mem_fraction),
        *slime.model_args,
    ]  # fmt: skip


@dataclass(frozen=True)
class Process:
    """One process reef starts for the run."""

    name: str
    argv: tuple[str, ...]


@dataclass(frozen=True)
class SlimePlan:
    """What reef starts for a Slime run, and where it is reached."""

    processes: tuple[Process, ...]
    stop: tuple[tuple[str, ...], ...]  # commands that end the run, in order
    ports: dict[str, int]
    router_url: str
    work: Path
    spool: Path
    megatron_config: dict[str, Any]  # written to `<work>/megatron.yaml` before the job starts


def plan_run(settings: Settings, reef_root: Path, node_ip: str) -> SlimePlan:
    """The Ray head, then `train.py` as a Ray job (with reef importable and the spool named in its environment)."""
    slime, embedded = settings.of(SlimeSection), settings.embedded
    if slime.path is None:
        raise SettingsError(
            f"training.trainer = slime needs slime.path (the checkout holding train.py); {SLIME_INSTALL_HINT}"
        )
    work = (settings.reef.state_dir / "slime").resolve()
    spool = work / "rollouts"
    gpus = slime.actor_gpus + slime.rollout_gpus
    ray_head = (
        "ray", "start", "--head",
        "--port", str(slime.ray_port),
        "--dashboard-port", str(slime.ray_dashboard_port),
        "--num-gpus", str(gpus),
        "--disable-usage-stats",
    )  # fmt: skip
    alpha = str(training_of(settings).lambda_alpha)
    environment = {"env_vars": {"PYTHONPATH": str(reef_root), SLIME_SPOOL_ENV: str(spool), SAO_LAMBDA_ALPHA_ENV: alpha}}
    dashboard = f"http://127.0.0.1:{slime.ray_dashboard_port}"
    job = (
        "ray", "job", "submit",
        "--address", dashboard,
        "--submission-id", JOB_ID,
        "--runtime-env-json", json.dumps(environment),
        "--no-wait",
        "--",
        "python3", str(slime.path.resolve() / "train.py"),
        *slime_flags(settings, work),
    )  # fmt: skip
    ports = {
        "ray": slime.ray_port,
        "ray-dashboard": slime.ray_dashboard_port,
        "sglang-router": embedded.sglang_port,
        "sglang-engines-from": ENGINE_FIRST_PORT,
        "reef": settings.reef.port,
    }
    router = embedded.sglang_url or f"http://{node_ip}:{embedded.sglang_port}"
    stop = (("ray", "job", "stop", "--address", dashboard, JOB_ID), ("ray", "stop"))
    processes = (Process("ray-head", ray_head), Process("slime-train", job))
    return SlimePlan(processes, stop, ports, router, work, spool, megatron_config(settings))


def node_address() -> str:
    """This node's IP, where the router Slime starts listens (it binds the node's address, not loopback); the
    embedded runtime's SGLang engine attaches to it at the same address."""
    return socket.gethostbyname(socket.gethostname())


def check_ready(settings: Settings) -> None:
    """SettingsError naming what to install or set when a Slime run cannot start here: Slime, Ray, SGLang, CUDA
    GPUs (actor and engines), and the settings it needs."""
    missing = []
    slime = settings.of(SlimeSection)
    if slime.path is None or not (slime.path / "train.py").is_file():
        missing.append(f"Slime ({SLIME_INSTALL_HINT})")
    if importlib.util.find_spec("ray") is None:
        missing.append("Ray (pip install 'ray[default]')")
    if importlib.util.find_spec("sglang") is None:
        missing.append("SGLang (pip install -e '.[embedded,gpu]')")
    gpus = _cuda_devices()
    wanted = slime.actor_gpus + slime.rollout_gpus
    if gpus < wanted:
        missing.append(f"{wanted} CUDA GPUs (slime.actor-gpus + slime.rollout-gpus; {gpus} visible)")
    if missing:
        raise SettingsError(f"training.trainer = slime cannot start here; missing: {'; '.join(missing)}")
    if settings.embedded.engine != "sglang":
        raise SettingsError(
            "training.trainer = slime trains the SGLang engines it starts; set embedded.engine = sglang"
        )
    if settings.inference.model_path is None:
        raise SettingsError("training.trainer = slime needs inference.model-path, the Hugging Face folder to train")


def _cuda_devices() -> int:
    if importlib.util.find_spec("torch") is None:
        return 0
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
