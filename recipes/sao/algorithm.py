"""The SAO objective on tensors: the DIS policy loss, skip-observation GAE with a critic, and the GRPO control.

Shapes: one rollout at a time, 1-D tensors over its generated tokens. `action_mask` marks tokens the model
generated (1) versus observation tokens inside the response (0); without one, every token is an action.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DisBounds:
    """Tokens are kept when 1 - low < ratio < 1 + high (both strict); outside, they carry no gradient."""

    low: float = 0.3
    high: float = 5.0


@dataclass(frozen=True)
class PolicyLoss:
    loss: torch.Tensor
    ratio: torch.Tensor
    masked_fraction: float  # share of action tokens outside the band


def dis_policy_loss(
    logprobs: torch.Tensor,
    rollout_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    bounds: DisBounds,
    action_mask: torch.Tensor | None = None,
) -> PolicyLoss:
    """Direct double-sided importance sampling: -sg(f(r)) * A * log pi, f(r) = r inside the band, 0 outside.

    The ratio is taken against the log-probs recorded when the tokens were sampled; there is no KL term.
    The loss is the mean over action tokens.
    """
    ratio = torch.exp(logprobs.detach() - rollout_logprobs)
    kept = ((ratio > 1.0 - bounds.low) & (ratio < 1.0 + bounds.high)).to(logprobs.dtype)
    actions = torch.ones_like(logprobs) if action_mask is None else action_mask.to(logprobs.dtype)
    weight = (ratio * kept * actions).detach()
    per_token = -weight * advantages.detach() * logprobs
    count = actions.sum().clamp(min=1.0)
    masked = float(((1.0 - kept) * actions).sum() / count)
    return PolicyLoss(per_token.sum() / count, ratio, masked)


def length_adaptive_lambda(length: int, alpha: float = 1.5) -> float:
    """lambda = 1 - 1 / (alpha * L), clamped to [0, 1]: longer answers look further ahead."""
    if length <= 0:
        return 0.0
    return min(1.0, max(0.0, 1.0 - 1.0 / (alpha * length)))


def gae(
    values: torch.Tensor,
    reward: float,
    gamma: float,
    lam: float,
    action_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns of one rollout whose only reward is on its last action token.

    Observation tokens are skipped: the recurrence bridges from one action token straight to the previous one,
    and observation tokens get advantage and return 0.
    """
    length = values.shape[0]
    actions = [True] * length if action_mask is None else [bool(flag) for flag in action_mask.tolist()]
    advantages = torch.zeros(length, dtype=values.dtype)
    returns = torch.zeros(length, dtype=values.dtype)
    action_positions = [index for index in range(length) if actions[index]]
    running = 0.0
    next_value = 0.0
    for position_number, index in enumerate(reversed(action_positions)):
        step_reward = reward if position_number == 0 else 0.0
        value = float(values[index])
        delta = step_reward + gamma * next_value - value
        running = delta + gamma * lam * running
        advantages[index] = running
        returns[index] = running + value
        next_value = value
    return advantages, returns


def grpo_advantages(rewards: list[float], groups: list[str]) -> list[float]:
    """Group-normalised rewards: (r - mean of its group) / (std of its group + 1e-6)."""
    by_group: dict[str, list[float]] = {}
    for reward, group in zip(rewards, groups, strict=True):
        by_group.setdefault(group, []).append(reward)
    normalised = []
    for reward, group in zip(rewards, groups, strict=True):
        members = torch.tensor(by_group[group], dtype=torch.float64)
        spread = float(members.std(unbiased=False)) if len(members) > 1 else 0.0
        normalised.append((reward - float(members.mean())) / (spread + 1e-6))
    return normalised
