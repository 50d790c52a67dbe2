"""The SAO loss, mask and advantages against a pure-Python reference on small hand-made tensors."""

from __future__ import annotations

import math

import pytest
import torch

from recipes.sao.algorithm import DisBounds, dis_policy_loss, gae, grpo_advantages, length_adaptive_lambda


def reference_gae(
    values: list[float], reward: float, gamma: float, lam: float, actions: list[int]
) -> tuple[list[float], list[float]]:
    advantages, returns = [0.0] * len(values), [0.0] * len(values)
    positions = [i for i, a in enumerate(actions) if a]
    running, next_value = 0.0, 0.0
    for n, i in enumerate(reversed(positions)):
        delta = (reward if n == 0 else 0.0) + gamma * next_value - values[i]
        running = delta + gamma * lam * running
        advantages[i], returns[i] = running, running + values[i]
        next_value = values[i]
    return advantages, returns


def test_gae_matches_the_reference_and_skips_observation_tokens() -> None:
    values = [0.1, -0.2, 0.4, 0.3, 0.05]
    actions = [1, 1, 0, 1, 1]
    advantages, returns = gae(torch.tensor(values), 1.0, 1.0, 0.9, torch.tensor(actions))
    want_a, want_r = reference_gae(values, 1.0, 1.0, 0.9, actions)
    assert advantages.tolist() == pytest.approx(want_a)
    assert returns.tolist() == pytest.approx(want_r)
    assert advantages[2] == 0 and returns[2] == 0
    # By hand: the last action gets delta = 1 - 0.05; with gamma = lambda = 1 every return is the reward.
    assert advantages[4] == pytest.approx(0.95)
    _, monte_carlo = gae(torch.tensor(values), 1.0, 1.0, 1.0, torch.tensor(actions))
    assert [monte_carlo[i].item() for i in (0, 1, 3, 4)] == pytest.approx([1.0, 1.0, 1.0, 1.0])


def test_length_adaptive_lambda() -> None:
    assert length_adaptive_lambda(10, 1.5) == pytest.approx(1 - 1 / 15)
    assert length_adaptive_lambda(1, 0.5) == 0.0  # 1 - 2 clamps to 0
    assert length_adaptive_lambda(0) == 0.0


def test_dis_mask_keeps_only_ratios_inside_the_band() -> None:
    probabilities = [0.3, 0.355, 0.5, 2.95, 3.25]  # against 0.5: ratios 0.6, 0.71, 1.0, 5.9, 6.5
    ratios = [p / 0.5 for p in probabilities]
    kept = [0.7 < r < 6.0 for r in ratios]
    assert kept == [False, True, True, True, False]
    rollout = torch.log(torch.full((5,), 0.5, dtype=torch.float64))
    current = torch.log(torch.tensor(probabilities, dtype=torch.float64)).requires_grad_()
    advantages = [1.0, 1.0, -2.0, 0.5, 1.0]
    result = dis_policy_loss(current, rollout, torch.tensor(advantages, dtype=torch.float64), DisBounds(0.3, 5.0))
    weights = [r if k else 0.0 for r, k in zip(ratios, kept, strict=True)]
    expected = -sum(w * a * math.log(p) for w, a, p in zip(weights, advantages, probabilities, strict=True)) / 5
    assert result.loss.item() == pytest.approx(expected, rel=1e-9)
    assert result.masked_fraction == pytest.approx(2 / 5)
    result.loss.backward()
    assert current.grad is not None
    # d loss / d log p_t = -w_t * A_t / N: zero outside the band, and no KL term anywhere.
    assert current.grad.tolist() == pytest.approx([-w * a / 5 for w, a in zip(weights, advantages, strict=True)])


def test_observation_tokens_carry_no_loss() -> None:
    rollout = torch.zeros(3)
    current = torch.zeros(3, requires_grad=True)
    result = dis_policy_loss(current, rollout, torch.tensor([1.0, 5.0, 1.0]), DisBounds(), torch.tensor([1, 0, 1]))
    result.loss.backward()
    assert current.grad is not None and current.grad.tolist() == pytest.approx([-0.5, 0.0, -0.5])


def test_grpo_advantages_are_normalised_within_each_group() -> None:
    rewards = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    groups = ["a", "a", "a", "b", "b", "b"]
    normalised = grpo_advantages(rewards, groups)
    mean_a, std_a = 2 / 3, math.sqrt(((1 / 3) ** 2 * 2 + (2 / 3) ** 2) / 3)
    assert normalised[0] == pytest.approx((1 - mean_a) / (std_a + 1e-6))
    assert normalised[3] == pytest.approx((1 - 1 / 3) / (math.sqrt(2 / 9) + 1e-6))
    assert sum(normalised[:3]) == pytest.approx(0.0, abs=1e-9)
