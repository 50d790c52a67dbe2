"""SAO's loss pieces as Slime hooks, run inside Slime's Megatron actors (Slime loads them by dotted path).

- `dis_mask` (`--use-tis --custom-tis-function-path`): DIS's double-sided hard mask. With `--use-rollout-logprobs`
  Slime's policy loss is PPO's clipped surrogate against the rollout log-probs; inside the band
  (1 - eps-clip, 1 + eps-clip-high) the clip is inactive and its gradient is DIS's, -A * grad(ratio). Outside it, DIS
  drops the token whatever the advantage's sign, which this mask does (PPO's clip alone keeps some of them).
- `sao_advantages` (`--custom-advantage-function-path`): skip-observation GAE with gamma 1 and SAO's
  length-adaptive lambda = 1 - 1/(alpha L) for the actor, and lambda 1 returns (the reward) for the critic. Alpha
  comes from the job's environment. Written for context parallelism 1 (each sample's values whole on one rank).

Both reuse reef's CPU implementation (`recipes/sao/algorithm.py`), so the two trainers compute the same thing.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from recipes.sao.algorithm import gae, length_adaptive_lambda
from reef_contract import SAO_LAMBDA_ALPHA_ENV

DEFAULT_ALPHA = 1.5


def dis_mask(
    args: Any,
    *,
    pg_loss: torch.Tensor,
    train_log_probs: list[torch.Tensor],
    rollout_log_probs: list[torch.Tensor],
    loss_masks: list[torch.Tensor],
    **_: Any,
) -> tuple[torch.Tensor, list[torch.Tensor], dict[str, torch.Tensor]]:
    """Zero the per-token loss (and mask) where pi_theta / pi_rollout leaves (1 - eps_clip, 1 + eps_clip_high)."""
    ratio = torch.exp(torch.cat(train_log_probs, dim=0) - torch.cat(rollout_log_probs, dim=0))
    kept = (ratio > 1.0 - args.eps_clip) & (ratio < 1.0 + args.eps_clip_high)
    pieces = torch.split(kept, [int(mask.numel()) for mask in loss_masks])
    masks = [mask * piece.to(mask.dtype) for mask, piece in zip(loss_masks, pieces, strict=True)]
    metrics = {"tis": ratio.detach().clone(), "tis_clipfrac": (~kept).float(), "tis_abs": (ratio - 1).abs().detach()}
    return pg_loss * kept.to(pg_loss.dtype), masks, metrics


def sao_advantages(args: Any, rollout_data: dict[str, Any]) -> None:
    """Fill `advantages` (length-adaptive lambda) and `returns` (lambda 1) per sample, gamma 1."""
    alpha = float(os.environ.get(SAO_LAMBDA_ALPHA_ENV, DEFAULT_ALPHA))
    advantages, returns = [], []
    for values, reward, mask in zip(
        rollout_data["values"], rollout_data["rewards"], rollout_data["loss_masks"], strict=True
    ):
        on_cpu, actions = values.detach().float().cpu(), mask.detach().cpu()
        lam = length_adaptive_lambda(int(actions.sum()), alpha)
        advantage, _ = gae(on_cpu, float(reward), 1.0, lam, actions)
        _, target = gae(on_cpu, float(reward), 1.0, 1.0, actions)
        advantages.append(advantage.to(values.device))
        returns.append(target.to(values.device))
    rollout_data["advantages"], rollout_data["returns"] = advantages, returns
