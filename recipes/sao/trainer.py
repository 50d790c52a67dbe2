"""The CPU trainer of one scenario: its policy (`policy.py`: a LoRA adapter on the shared frozen fp32 base, or the
top layers of an fp32 copy of the served model), a value head (the critic), and one step of SAO or GRPO.

With `training.adapter = full`, to fit a 2-core machine, only the top decoder blocks and the final norm learn; the
embeddings (tied to the output head) and lower blocks stay as served. Whatever the policy, the critic is the
scenario's own: a linear value head on the policy's last hidden states (detached, each token's vector scaled to unit
RMS so that the critic's learning rate means the same whatever the model's hidden scale), zero-initialised: every
value starts at 0. Runs on a worker thread, never on the event loop.

One step of SAO, in the original's order: the values of the step's samples are read first, and the advantages
(length-adaptive GAE) come from those values, so a sample's reward never leaks into its own baseline; then the critic
takes `critic-steps` updates towards the rewards (PPO value clipping around the values read, gradient-norm
clipping); then, after `critic-warmup-steps` critic-only steps, the policy takes one DIS step. A step whose every
advantage is 0 (V = 0 and all rewards 0, or a GRPO group that scored alike) moves nothing.

The model runs on `training.device` (a CUDA GPU when one is present, by default); the per-token log-probs and hidden
states come back to the CPU, where the value head, the advantages and the loss are computed, and the weights it
hands out are CPU tensors.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from recipes.sao.algorithm import DisBounds, dis_policy_loss, gae, grpo_advantages, length_adaptive_lambda
from recipes.sao.policy import FullPolicy, Policy
from recipes.sao.rollout import Rollout
from recipes.sao.settings import TrainingSection
from reef_daemon.recipe_api import SettingsError

DIAGNOSTICS_WINDOW = 32  # samples the critic's diagnostics are computed over


@dataclass(frozen=True)
class StepResult:
    metrics: dict[str, Any]
    weights: dict[str, torch.Tensor]  # the trained weights after the step, named as the server takes them


@dataclass(frozen=True)
class _Sample:
    """What the critic's diagnostics keep of one trained sample."""

    reward: float
    values: torch.Tensor  # read before the critic trained on the sample
    advantage: float  # its mean over the sample's tokens


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
    def __init__(
        self,
        weights_dir: Path,
        training: TrainingSection,
        advantage: str = "gae",
        failed_below: float = 0.5,
        policy: Policy | None = None,
    ) -> None:
        """A trainer of `policy` (by default, `full`: the top layers of a model copy loaded from `weights_dir`)."""
        self.training = training
        self.advantage = advantage
        self.failed_below = failed_below  # a reward below this is a failed answer (the middle of the score scale)
        self.device = training_device(training.device)
        self.policy = policy if policy is not None else FullPolicy(weights_dir, self.device)
        self.trainable = self.policy.trainable
        hidden_size = int(self.policy.model.config.hidden_size)
        self.value_head = torch.nn.Linear(hidden_size, 1)
        with torch.no_grad():  # V = 0 everywhere until the critic has learned something
            self.value_head.weight.zero_()
            self.value_head.bias.zero_()
        self.policy_optimizer = torch.optim.Adam(list(self.trainable.values()), lr=training.learning_rate)
        self.critic_optimizer = torch.optim.Adam(self.value_head.parameters(), lr=training.critic_learning_rate)
        self.steps_done = 0
        self.policy_updates = 0
        self._window: deque[_Sample] = deque(maxlen=DIAGNOSTICS_WINDOW)

    def weights(self) -> dict[str, torch.Tensor]:
        """The trained weights, detached copies named as the server takes them."""
        return self.policy.weights()

    def state(self) -> dict[str, torch.Tensor]:
        """Everything a checkpoint keeps: trainable weights and the value head."""
        state = self.weights()
        state.update(
            {f"value_head.{name}": p.detach().to("cpu", copy=True) for name, p in self.value_head.named_parameters()}
        )
        return state

    def load(self, state: dict[str, torch.Tensor], steps_done: int, policy_updates: int) -> dict[str, torch.Tensor]:
        """Restore a checkpoint; returns the policy weights to swap into the server. Optimizer moments restart."""
        self.policy.load(state)
        with torch.no_grad():
            for name, parameter in self.value_head.named_parameters():
                key = f"value_head.{name}"
                if key in state:
                    parameter.copy_(state[key])
        self.policy_optimizer = torch.optim.Adam(list(self.trainable.values()), lr=self.training.learning_rate)
        self.critic_optimizer = torch.optim.Adam(self.value_head.parameters(), lr=self.training.critic_learning_rate)
        self.steps_done, self.policy_updates = steps_done, policy_updates
        self._window.clear()
        return self.weights()

    def _forward(self, rollout: Rollout) -> _Forward:
        """Under the policy's lock, with its weights active."""
        ids = torch.tensor([list(rollout.prompt_ids) + list(rollout.output_ids)], dtype=torch.long, device=self.device)
        self.policy.activate()
        out = self.policy.model(input_ids=ids, output_hidden_states=True)
        start = len(rollout.prompt_ids) - 1
        end = start + len(rollout.output_ids)
        logits = out.logits[0, start:end].float()
        targets = torch.tensor(rollout.output_ids, dtype=torch.long, device=self.device)
        logprobs = torch.log_softmax(logits, dim=-1).gather(1, targets[:, None]).squeeze(1)
        hidden = out.hidden_states[-1][0, start:end].detach().cpu()
        scaled = hidden * torch.rsqrt(hidden.pow(2).mean(dim=-1, keepdim=True) + 1e-6)  # unit RMS per token
        return _Forward(logprobs.cpu(), scaled)

    def logprobs(self, rollout: Rollout) -> list[float]:
        """The current policy's log-probs of a rollout's tokens (for checks and the demo)."""
        with torch.no_grad(), self.policy.lock:
            return [float(x) for x in self._forward(rollout).logprobs]

    def values(self, rollout: Rollout) -> list[float]:
        """The critic's value of each of a rollout's tokens (for checks)."""
        with torch.no_grad(), self.policy.lock:
            return [float(x) for x in self.value_head(self._forward(rollout).hidden).squeeze(-1)]

    def step(self, rollouts: list[Rollout]) -> StepResult:
        with self.policy.lock:
            self.policy.train_dropout(True)
            try:
                return self._step(rollouts)
            finally:
                self.policy.train_dropout(False)

    def _step(self, rollouts: list[Rollout]) -> StepResult:
        began = time.perf_counter()
        forwards = [self._forward(rollout) for rollout in rollouts]
        metrics: dict[str, Any] = {
            "mean_reward": sum(r.reward for r in rollouts) / len(rollouts),
            "tokens": sum(len(r.output_ids) for r in rollouts),
        }
        if self.advantage == "grpo":  # no critic: the group is the baseline, and the policy moves from step 1
            advantages = self._group_advantages(rollouts)
            warm = True
        else:
            with torch.no_grad():  # read before the critic trains on these samples
                values = [self.value_head(forward.hidden).squeeze(-1) for forward in forwards]
            advantages = self._gae_advantages(rollouts, values)
            metrics.update(self._train_critic(rollouts, forwards, values))
            warm = self.steps_done >= self.training.critic_warmup_steps
            for rollout, value, advantage in zip(rollouts, values, advantages, strict=True):
                self._window.append(_Sample(rollout.reward, value, float(advantage.mean())))
            metrics.update(self.diagnostics(values))
        signal = any(bool(advantage.abs().max() > 0) for advantage in advantages if advantage.numel())
        self.steps_done += 1
        metrics["policy_updated"] = warm and signal
        if not warm:
            metrics["critic_warmup"] = True
            metrics["reason"] = (
                f"critic warm-up step {self.steps_done} of {self.training.critic_warmup_steps}: the value head"
                " trained, the weights did not change"
            )
        elif not signal:
            metrics["no_signal"] = True
            metrics["reason"] = "every advantage was 0 (the rewards matched their baseline): the weights did not change"
        else:
            metrics.update(self._train_policy(rollouts, forwards, advantages))
            self.policy_updates += 1
        metrics["train_time_s"] = round(time.perf_counter() - began, 3)
        return StepResult(metrics, self.weights())

    def _train_critic(
        self, rollouts: list[Rollout], forwards: list[_Forward], old_values: list[torch.Tensor]
    ) -> dict[str, Any]:
        """`critic-steps` updates of the value head towards the returns (critic lambda = 1: every token's return is
        the reward), each value kept within `value-clip` of the value read before them (PPO value clipping)."""
        clip = self.training.value_clip
        loss_value, grad_norm, updates = 0.0, 0.0, 0
        for _ in range(self.training.critic_steps):
            self.critic_optimizer.zero_grad()
            losses = []
            for rollout, forward, old in zip(rollouts, forwards, old_values, strict=True):
                values = self.value_head(forward.hidden).squeeze(-1)
                returns = torch.full_like(values, rollout.reward)
                clipped = old + (values - old).clamp(-clip, clip)
                losses.append(0.5 * torch.maximum((values - returns) ** 2, (clipped - returns) ** 2).mean())
            loss = torch.stack(losses).mean()
            torch.autograd.backward(loss)
            norm = float(torch.nn.utils.clip_grad_norm_(self.value_head.parameters(), self.training.max_grad_norm))
            loss_value, grad_norm = loss.item(), max(grad_norm, norm)
            if norm > 0:  # a zero gradient moves nothing (Adam's moments would, from earlier steps)
                self.critic_optimizer.step()
                updates += 1
        return {"critic_loss": loss_value, "critic_grad_norm": grad_norm, "critic_updates": updates}

    def diagnostics(self, values: list[torch.Tensor] | None = None) -> dict[str, Any]:
        """Is the critic learning? The range of the values read this step, the explained variance of the rewards
        by the values (1 - Var(R - V) / Var(R), over the tokens of the last DIAGNOSTICS_WINDOW samples; None while
        the rewards there are all alike), and the share of failed answers there given a positive advantage."""
        window = list(self._window)
        read = values if values is not None else [sample.values for sample in window[-1:]]
        flat = torch.cat(read) if read and any(v.numel() for v in read) else torch.zeros(0)
        diagnostics: dict[str, Any] = {
            "value_min": round(float(flat.min()), 4) if flat.numel() else None,
            "value_max": round(float(flat.max()), 4) if flat.numel() else None,
            "critic_window": len(window),
            "explained_variance": None,
            "failed_positive_share": None,
        }
        if window:
            returns = torch.cat([torch.full_like(s.values, s.reward) for s in window])
            predicted = torch.cat([s.values for s in window])
            spread = float(returns.var(unbiased=False)) if returns.numel() > 1 else 0.0
            if spread > 1e-12:
                explained = 1.0 - float((returns - predicted).var(unbiased=False)) / spread
                diagnostics["explained_variance"] = round(explained, 4) if math.isfinite(explained) else None
            failed = [s for s in window if s.reward < self.failed_below]
            if failed:
                diagnostics["failed_positive_share"] = round(sum(s.advantage > 0 for s in failed) / len(failed), 4)
        return diagnostics

    def _group_advantages(self, rollouts: list[Rollout]) -> list[torch.Tensor]:
        normalised = grpo_advantages([r.reward for r in rollouts], [r.group for r in rollouts])
        return [torch.full((len(r.output_ids),), a) for r, a in zip(rollouts, normalised, strict=True)]

    def _gae_advantages(self, rollouts: list[Rollout], values: list[torch.Tensor]) -> list[torch.Tensor]:
        advantages = []
        for rollout, value in zip(rollouts, values, strict=True):
            lam = length_adaptive_lambda(len(rollout.output_ids), self.training.lambda_alpha)
            advantages.append(gae(value, rollout.reward, 1.0, lam)[0])
        return advantages

    def _train_policy(
        self, rollouts: list[Rollout], forwards: list[_Forward], advantages: list[torch.Tensor]
    ) -> dict[str, Any]:
        bounds = DisBounds(self.training.dis_low, self.training.dis_high)
        self.policy_optimizer.zero_grad()
        results = []
        for rollout, forward, advantage in zip(rollouts, forwards, advantages, strict=True):
            recorded = torch.tensor(rollout.logprobs, dtype=torch.float32)
            results.append(dis_policy_loss(forward.logprobs, recorded, advantage, bounds))
        loss = torch.stack([result.loss for result in results]).mean()
        torch.autograd.backward(loss)
        grad_norm = torch.nn.utils.clip_grad_norm_(list(self.trainable.values()), self.training.max_grad_norm)
        self.policy_optimizer.step()
        ratios = torch.cat([result.ratio for result in results])
        return {
            "loss": loss.item(),
            "grad_norm": round(float(grad_norm), 4),
            "ratio_mean": float(ratios.mean()),
            "ratio_min": float(ratios.min()),
            "ratio_max": float(ratios.max()),
            "masked_fraction": sum(result.masked_fraction for result in results) / len(results),
        }
