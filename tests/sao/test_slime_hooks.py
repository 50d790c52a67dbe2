"""SAO's Slime hooks compute what reef's CPU trainer computes: PPO's surrogate against the rollout log-probs under
the DIS mask has DIS's gradient, and the advantage hook gives length-adaptive-lambda GAE advantages and lambda-1
returns."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from recipes.sao.algorithm import DisBounds, dis_policy_loss, gae, length_adaptive_lambda
from recipes.sao.slime.hooks import dis_mask, sao_advantages
from reef_contract import SAO_LAMBDA_ALPHA_ENV

ARGS = SimpleNamespace(eps_clip=0.3, eps_clip_high=5.0)


def ppo_surrogate(logprobs: torch.Tensor, rollout: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """Slime's per-token clipped PPO loss with pi_old = the rollout's log-probs (`--use-rollout-logprobs`)."""
    ratio = torch.exp(logprobs - rollout)
    clipped = torch.clamp(ratio, 1 - ARGS.eps_clip, 1 + ARGS.eps_clip_high)
    return torch.maximum(-ratio * advantages, -clipped * advantages)


def test_ppo_under_the_dis_mask_has_the_dis_gradient() -> None:
    # ratios 0.5 (below the band), 0.9 and 1.5 (inside), 7.0 (above), with advantages of both signs
    rollout = torch.log(torch.tensor([0.2, 0.3, 0.1, 0.05, 0.4, 0.1]))
    ratios = torch.tensor([0.5, 0.9, 1.5, 7.0, 0.5, 7.0])
    advantages = torch.tensor([1.0, -2.0, 0.5, -1.0, -1.0, 1.0])
    logprobs = (rollout + torch.log(ratios)).clone().requires_grad_(True)
    masks = [torch.ones(4), torch.ones(2)]
    loss, new_masks, metrics = dis_mask(
        ARGS,
        pg_loss=ppo_surrogate(logprobs, rollout, advantages),
        train_log_probs=[logprobs.detach()[:4], logprobs.detach()[4:]],
        rollout_log_probs=[rollout[:4], rollout[4:]],
        loss_masks=masks,
    )
    (loss.sum() / 6).backward()
    slime_grad = logprobs.grad.clone()

    reference = logprobs.detach().clone().requires_grad_(True)
    dis_policy_loss(reference, rollout, advantages, DisBounds(0.3, 5.0)).loss.backward()
    assert torch.allclose(slime_grad, reference.grad, atol=1e-6)
    assert [m.tolist() for m in new_masks] == [[0.0, 1.0, 1.0, 0.0], [0.0, 0.0]]
    assert metrics["tis_clipfrac"].tolist() == [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]


def test_the_advantage_hook_is_length_adaptive_gae(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SAO_LAMBDA_ALPHA_ENV, "2.0")
    values = [torch.tensor([0.1, 0.2, 0.3]), torch.tensor([0.5, -0.5])]
    data = {"values": values, "rewards": [1.0, 0.0], "loss_masks": [torch.ones(3), torch.tensor([1.0, 0.0])]}
    sao_advantages(SimpleNamespace(), data)
    lam = length_adaptive_lambda(3, 2.0)
    assert torch.allclose(data["advantages"][0], gae(values[0], 1.0, 1.0, lam)[0])
    assert torch.allclose(data["returns"][0], gae(values[0], 1.0, 1.0, 1.0)[1])
    assert data["returns"][1].tolist() == [0.0, 0.0] and data["advantages"][1][1] == 0.0  # an observation token
