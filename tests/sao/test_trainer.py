"""The torch trainer's critic on a tiny random model: it starts at V = 0, a step with nothing to learn from moves
nothing, a sample's advantage never depends on the critic's update on that sample, and the value and gradient
clipping hold."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from recipes.sao.rollout import Rollout
from recipes.sao.settings import TrainingSection
from recipes.sao.trainer import Trainer


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=True,
    )  # fmt: skip
    folder = tmp_path_factory.mktemp("tiny-llama")
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


def rollout(reward: float, output: tuple[int, ...] = (5, 6, 7, 8), prompt: tuple[int, ...] = (1, 2, 3)) -> Rollout:
    return Rollout("rec", "rep", prompt, output, (-1.0,) * len(output), ("inc:0",), reward, "group")


def trainer(folder: Path, **overrides: object) -> Trainer:
    training = dataclasses.replace(TrainingSection(critic_warmup_steps=0, device="cpu"), **overrides)  # type: ignore[arg-type]
    made = Trainer(folder, training)
    # The recorded log-probs must be the policy's own for the ratio to be 1 (inside the DIS band).
    return made


def on_policy(made: Trainer, sample: Rollout) -> Rollout:
    return dataclasses.replace(sample, logprobs=tuple(made.logprobs(sample)))


def state(made: Trainer) -> dict[str, torch.Tensor]:
    return {name: tensor.clone() for name, tensor in made.state().items()}


def test_the_value_head_starts_at_zero(tiny_model: Path) -> None:
    made = trainer(tiny_model)
    assert made.values(rollout(1.0)) == [0.0, 0.0, 0.0, 0.0]


def test_all_zero_rewards_with_a_zero_critic_move_nothing(tiny_model: Path) -> None:
    made = trainer(tiny_model)
    before = state(made)
    result = made.step([on_policy(made, rollout(0.0)), on_policy(made, rollout(0.0, output=(9, 10)))])
    after = state(made)
    assert all(torch.equal(before[name], after[name]) for name in before)
    assert result.metrics["policy_updated"] is False and result.metrics["no_signal"] is True
    assert result.metrics["critic_updates"] == 0 and made.policy_updates == 0


def test_the_advantage_of_a_sample_is_read_before_the_critic_trains_on_it(tiny_model: Path) -> None:
    """Two trainers that differ only in how far the critic moves on the step make the same policy update."""
    slow, fast = trainer(tiny_model, critic_learning_rate=1e-9), trainer(tiny_model, critic_learning_rate=1e-1)
    sample = on_policy(slow, rollout(1.0))
    slow.step([sample])
    fast.step([sample])
    assert fast.values(sample) != slow.values(sample)  # the critics did train differently
    for name, weight in slow.weights().items():
        assert torch.equal(weight, fast.weights()[name]), name


def test_a_critic_update_keeps_values_near_those_read_before_it(tiny_model: Path) -> None:
    """Value clipping: many updates towards a reward of 1 stop near the clip range instead of reaching it."""
    free = trainer(tiny_model, critic_learning_rate=1e-3, critic_steps=40, value_clip=1e6)
    clipped = trainer(tiny_model, critic_learning_rate=1e-3, critic_steps=40, value_clip=0.05)
    sample = on_policy(free, rollout(1.0))
    for made in (free, clipped):
        made.step([sample])
    free_mean, clipped_mean = (sum(made.values(sample)) / 4 for made in (free, clipped))
    assert free_mean > 0.4 and clipped_mean < 0.2


def test_gradients_are_clipped_to_the_max_norm(tiny_model: Path) -> None:
    made = trainer(tiny_model, max_grad_norm=1e-3, critic_learning_rate=1e-2)
    result = made.step([on_policy(made, rollout(1.0))])
    assert result.metrics["policy_updated"] is True and result.metrics["grad_norm"] > 1e-3
    policy = torch.sqrt(sum((p.grad**2).sum() for p in made.trainable.values() if p.grad is not None))
    critic = torch.sqrt(sum((p.grad**2).sum() for p in made.value_head.parameters() if p.grad is not None))
    assert float(policy) <= 1e-3 * 1.01 and float(critic) <= 1e-3 * 1.01


def test_the_diagnostics_say_whether_the_critic_explains_the_rewards(tiny_model: Path) -> None:
    made = trainer(tiny_model, critic_learning_rate=1e-2, critic_warmup_steps=100)
    good, bad = rollout(1.0, output=(5, 6, 7)), rollout(0.0, output=(40, 41, 42))
    first = made.step([good, bad]).metrics
    assert first["explained_variance"] == pytest.approx(0.0) and first["failed_positive_share"] == 0.0
    assert first["value_min"] == first["value_max"] == 0.0 and first["critic_warmup"] is True
    for _ in range(15):
        last = made.step([good, bad]).metrics
    assert last["explained_variance"] > first["explained_variance"] + 0.2
    assert last["critic_window"] == 32 and last["value_max"] > last["value_min"]
