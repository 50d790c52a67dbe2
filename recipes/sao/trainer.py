"""The CPU trainer: an fp32 copy of the served model, a value head (the critic), and one step of SAO or GRPO.

To fit a 2-core machine, only the top `trainable_layers` decoder blocks and the final norm learn; the embeddings
(tied to the output head) and lower blocks stay as served. The critic is a linear value head on the policy's last
hidden states (detached), its bias zero-initialised. Runs on a worker thread, never on the event loop.

The model runs on `training.device` (a CUDA GPU when one is present, by default); the per-token log-probs and hidden
states come back to the CPU, where the value head, the advantages and the loss are computed, and the weights it
hands out are CPU tensors.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from recipes.sao.algorithm import DisBounds, dis_policy_loss, gae, grpo_advantages, length_adaptive_lambda
from recipes.sao.rollout import Rollout
from recipes.sao.settings import TrainingSection
from reef_daemon.recipe_api import SettingsError

TRAINABLE_LAYERS = 4


@dataclass(frozen=True)
class StepResult:
    metrics: dict[str, Any]
    weights: dict[str, torch.Tensor]  # the trainable weights after the step, named as in the served model


@dataclass(frozen=True)
class _Forward:
    logprobs: torch.Tensor
    hidden: torch.Tensor


def training_device(choice: str) -> torch.device:
    """`training.device` as a torch device: auto is CUDA when a GPU is visible; SettingsError for cuda without one."""
    available = torch.cuda.is_available()
    if choice == "cuda" and not available:
        raise SettingsError(
            "training.device = cuda, but torch sees no CUDA GPU here (torch.cuda.is_available() is false); install a"
            " CUDA build of torch (https://pytorch.org/get-started/locally/) on a GPU machine, or use training.device"
            " = auto"
        )
    return torch.device("cuda" if choice == "cuda" or (choice == "auto" and available) else "cpu")


class Trainer:
    def __init__(self, weights_dir: Path, training: TrainingSection, advantage: str = "gae") -> None:
        from transformers import AutoModelForCausalLM

        self.training = training
        self.advantage = advantage
        self.device = training_device(training.device)
        model: Any = AutoModelForCausalLM.from_pretrained(weights_dir, dtype=torch.float32, local_files_only=True)
        self.model = model.to(self.device)
        self.model.train(False)  # no dropout; gradients still flow
        for parameter in self.model.parameters():
            parameter.requires_grad_(False)
        self.trainable = self._unfreeze_top(TRAINABLE_LAYERS)
        hidden_size = int(self.model.config.hidden_size)
        self.value_head = torch.nn.Linear(hidden_size, 1)
        with torch.no_grad():  # seeded, so that the same rollouts give the same run
            generator = torch.Generator().manual_seed(0)
            self.value_head.weight.copy_(torch.randn(self.value_head.weight.shape, generator=generator) * 0.01)
            self.value_head.bias.zero_()
        self.policy_optimizer = torch.optim.Adam(list(self.trainable.values()), lr=training.learning_rate)
        self.critic_optimizer = torch.optim.Adam(self.value_head.parameters(), lr=training.critic_learning_rate)
        self.steps_done = 0
        self.policy_updates = 0

    def _unfreeze_top(self, count: int) -> dict[str, torch.nn.Parameter]:
        layers = self.model.model.layers
        names = {f"model.layers.{index}." for index in range(max(0, len(layers) - count), len(layers))}
        trainable = {}
        for name, parameter in self.model.named_parameters():
            if any(name.startswith(prefix) for prefix in names) or name.startswith("model.norm."):
                parameter.requires_grad_(True)
                trainable[name] = parameter
        return trainable

    def weights(self) -> dict[str, torch.Tensor]:
        """The trainable weights, detached copies named as in the served model."""
        return {name: parameter.detach().to("cpu", copy=True) for name, parameter in self.trainable.items()}

    def state(self) -> dict[str, torch.Tensor]:
        """Everything a checkpoint keeps: trainable weights and the value head."""
        state = self.weights()
        state.update(
            {f"value_head.{name}": p.detach().to("cpu", copy=True) for name, p in self.value_head.named_parameters()}
        )
        return state

    def load(self, state: dict[str, torch.Tensor], steps_done: int, policy_updates: int) -> dict[str, torch.Tensor]:
        """Restore a checkpoint; returns the policy weights to swap into the server. Optimizer moments restart."""
        with torch.no_grad():
            for name, parameter in self.trainable.items():
                if name in state:
                    parameter.copy_(state[name])
            for name, parameter in self.value_head.named_parameters():
                key = f"value_head.{name}"
                if key in state:
                    parameter.copy_(state[key])
        self.policy_optimizer = torch.optim.Adam(list(self.trainable.values()), lr=self.training.learning_rate)
        self.critic_optimizer = torch.optim.Adam(self.value_head.parameters(), lr=self.training.critic_learning_rate)
        self.steps_done, self.policy_updates = steps_done, policy_updates
        return self.weights()

    def _forward(self, rollout: Rollout) -> _Forward:
        ids = torch.tensor([list(rollout.prompt_ids) + list(rollout.output_ids)], dtype=torch.long, device=self.device)
        out = self.model(input_ids=ids, output_hidden_states=True)
        start = len(rollout.prompt_ids) - 1
        end = start + len(rollout.output_ids)
        logits = out.logits[0, start:end].float() / rollout.temperature
        targets = torch.tensor(rollout.output_ids, dtype=torch.long, device=self.device)
        logprobs = torch.log_softmax(logits, dim=-1).gather(1, targets[:, None]).squeeze(1)
        return _Forward(logprobs.cpu(), out.hidden_states[-1][0, start:end].detach().cpu())

    def logprobs(self, rollout: Rollout) -> list[float]:
        """The current policy's log-probs of a rollout's tokens (for checks and the demo)."""
        with torch.no_grad():
            return [float(x) for x in self._forward(rollout).logprobs]

    def step(self, rollouts: list[Rollout]) -> StepResult:
        began = time.perf_counter()
        forwards = [self._forward(rollout) for rollout in rollouts]
        metrics: dict[str, Any] = {"mean_reward": sum(r.reward for r in rollouts) / len(rollouts)}
        if self.advantage == "grpo":  # no critic: the group is the baseline, and the policy moves from step 1
            warm = True
        else:
            metrics["critic_loss"] = self._train_critic(rollouts, forwards)
            warm = self.steps_done >= self.training.critic_warmup_steps
        metrics.update(
            {
                "tokens": sum(len(r.output_ids) for r in rollouts),
                "policy_updated": warm,
            }
        )
        if warm:
            metrics.update(self._train_policy(rollouts, forwards))
            self.policy_updates += 1
        self.steps_done += 1
        metrics["train_time_s"] = round(time.perf_counter() - began, 3)
        return StepResult(metrics, self.weights())

    def _train_critic(self, rollouts: list[Rollout], forwards: list[_Forward]) -> float:
        """K updates of the value head towards the returns (critic lambda = 1: every token's return is the reward)."""
        loss_value = 0.0
        for _ in range(self.training.critic_steps):
            self.critic_optimizer.zero_grad()
            losses = []
            for rollout, forward in zip(rollouts, forwards, strict=True):
                values = self.value_head(forward.hidden).squeeze(-1)
                _, returns = gae(values.detach(), rollout.reward, 1.0, 1.0)
                losses.append(torch.nn.functional.mse_loss(values, returns))
            loss = torch.stack(losses).mean()
            torch.autograd.backward(loss)
            self.critic_optimizer.step()
            loss_value = loss.item()
        return loss_value

    def _advantages(self, rollouts: list[Rollout], forwards: list[_Forward]) -> list[torch.Tensor]:
        if self.advantage == "grpo":
            normalised = grpo_advantages([r.reward for r in rollouts], [r.group for r in rollouts])
            return [torch.full((len(r.output_ids),), a) for r, a in zip(rollouts, normalised, strict=True)]
        advantages = []
        with torch.no_grad():
            for rollout, forward in zip(rollouts, forwards, strict=True):
                values = self.value_head(forward.hidden).squeeze(-1)
                lam = length_adaptive_lambda(len(rollout.output_ids), self.training.lambda_alpha)
                advantages.append(gae(values, rollout.reward, 1.0, lam)[0])
        return advantages

    def _train_policy(self, rollouts: list[Rollout], forwards: list[_Forward]) -> dict[str, Any]:
        bounds = DisBounds(self.training.dis_low, self.training.dis_high)
        self.policy_optimizer.zero_grad()
        results = []
        for rollout, forward, advantages in zip(rollouts, forwards, self._advantages(rollouts, forwards), strict=True):
            recorded = torch.tensor(rollout.logprobs, dtype=torch.float32)
            results.append(dis_policy_loss(forward.logprobs, recorded, advantages, bounds))
        loss = torch.stack([result.loss for result in results]).mean()
        torch.autograd.backward(loss)
        self.policy_optimizer.step()
        ratios = torch.cat([result.ratio for result in results])
        return {
            "loss": loss.item(),
            "ratio_mean": float(ratios.mean()),
            "ratio_min": float(ratios.min()),
            "ratio_max": float(ratios.max()),
            "masked_fraction": sum(result.masked_fraction for result in results) / len(results),
        }
