"""One arm of `reef demo sao`: a daemon on the embedded model with a weight recipe, fed the toy task's rollouts.

The arm talks to its daemon only as a client would: chat completions through the proxy, a score per answer through
`/reef/report`, and `/reef/status` to see each training step land.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recipes.sao.examples.toy import task
from reef_cli.daemon_process import start_daemon, stop_daemon
from reef_cli.state import DaemonFiles
from reef_client import ApiError, ReefClient
from reef_daemon.runtimes.model_cache import user_model_cache

SCENARIO = "toy"
EVALUATION_SCENARIO = "toy-held-out"  # never scored, so never trained on
MOVING_WINDOW = 10  # rollouts in the moving average of the reward
STEP_TIMEOUT_S = 600.0
POLL_S = 0.2
REQUEST_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Arm:
    """A recipe and how many rollouts make one of its steps (SAO: 1; GRPO: one group of the same prompt)."""

    recipe: str
    group: int

    @property
    def label(self) -> str:
        return self.recipe.upper()


@dataclass(frozen=True)
class StepRow:
    """One committed training step as the demo saw it."""

    step: int
    rollouts: int  # rollouts consumed so far by this arm
    reward: float  # mean reward of this step's rollouts
    moving_average: float  # mean reward of the last MOVING_WINDOW rollouts
    loss: float | None  # None while the critic warms up (no policy update)
    masked_fraction: float | None
    seconds: float  # wall time of the step: generation, scoring and training


def model_cache() -> Path:
    """Where the demo's daemons keep the embedded model's safetensors cache: the user's, shared across runs."""
    return user_model_cache()


@contextmanager
def demo_daemon(arm: Arm) -> Iterator[str]:
    """Run `reef serve --recipe <arm>` in the background on a temporary state directory; yield its URL."""
    with tempfile.TemporaryDirectory(prefix=f"reef-demo-{arm.recipe}-") as tmp:
        state = Path(tmp)
        cache = model_cache()
        cache.mkdir(parents=True, exist_ok=True)
        (state / "models").symlink_to(cache, target_is_directory=True)
        args = ["--recipe", arm.recipe, "--reef.state-dir", str(state), "--reef.port", "0"]
        args += ["--training.batch-size", str(arm.group)]
        for key, value in (task.GRPO_SETTINGS if arm.recipe == "grpo" else task.SETTINGS).items():
            args += [f"--{key}", value]
        started = start_daemon(DaemonFiles(state), args, "127.0.0.1", 0)
        try:
            yield started.url
        finally:
            stop_daemon(started.pid)


@dataclass(frozen=True)
class ArmPlan:
    """What one arm does for one seed: train on `rollouts`, and ask the held-out `items` before and after."""

    arm: Arm
    seed: int
    rollouts: list[task.Rollout]
    items: list[task.Rollout]


@dataclass(frozen=True)
class ArmRun:
    """One arm's run for one seed: its steps, and its mean held-out reward before and after training."""

    arm: Arm
    seed: int
    rows: list[StepRow]
    before: float
    after: float


def run_plan(
    client: ReefClient, plan: ArmPlan, on_phase: Callable[[str], None], on_step: Callable[[StepRow], None]
) -> ArmRun:
    """Evaluate on the held-out items, train, evaluate again."""
    on_phase("held-out questions, before")
    before = evaluate(client, plan.items)
    on_phase("training")
    rows = run_arm(client, plan.arm, plan.rollouts, on_step)
    on_phase("held-out questions, after")
    after = evaluate(client, plan.items)
    return ArmRun(plan.arm, plan.seed, rows, before, after)


def evaluate(client: ReefClient, items: list[task.Rollout]) -> float:
    """The mean reward of the current weights on the held-out `items` (sampled with their seeds, never scored)."""
    rewards = [_ask_and_score(client, item, EVALUATION_SCENARIO)[1] for item in items]
    return sum(rewards) / len(rewards)


def run_arm(
    client: ReefClient, arm: Arm, planned: list[task.Rollout], on_step: Callable[[StepRow], None]
) -> list[StepRow]:
    """Send the planned rollouts `arm.group` at a time, score each, wait for the step it drives; one row each."""
    rewards: list[float] = []
    rows: list[StepRow] = []
    for start in range(0, len(planned) - arm.group + 1, arm.group):
        began = time.perf_counter()
        scores = [_ask_and_score(client, rollout) for rollout in planned[start : start + arm.group]]
        for receipt, reward in scores:
            client.report(SCENARIO, [receipt], score=reward)
        rewards.extend(reward for _, reward in scores)
        metrics = _wait_for_step(client, len(rows) + 1)
        window = rewards[-MOVING_WINDOW:]
        row = StepRow(
            step=len(rows) + 1,
            rollouts=len(rewards),
            reward=float(metrics.get("mean_reward", sum(r for _, r in scores) / len(scores))),
            moving_average=sum(window) / len(window),
            loss=_number(metrics.get("loss")),
            masked_fraction=_number(metrics.get("masked_fraction")),
            seconds=time.perf_counter() - began,
        )
        rows.append(row)
        on_step(row)
    return rows


def _ask_and_score(client: ReefClient, rollout: task.Rollout, scenario: str = SCENARIO) -> tuple[str, float]:
    messages = [{"role": "user", "content": rollout.prompt.text}]
    reply = client.chat(scenario, messages, temperature=1.0, seed=rollout.seed, max_tokens=task.MAX_TOKENS)
    if not reply.receipt:
        raise ApiError(200, "invalid_response", "the daemon sent no receipt (x-reef-agent-record-id)")
    return reply.receipt, task.score(rollout.prompt, reply.text)


def _wait_for_step(client: ReefClient, step: int) -> dict[str, Any]:
    """The metrics of training step `step` once it is committed; fails when a report was refused for training."""
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while time.monotonic() < deadline:
        state = client.status()["training"]["scenarios"].get(SCENARIO)
        if state is None:  # no worker for the scenario yet
            time.sleep(POLL_S)
            continue
        if state["ineligible"]:
            reasons = "; ".join(f"{reason} ({count})" for reason, count in state["ineligible"].items())
            raise ApiError(409, "ineligible", f"the daemon refused rollouts for training: {reasons}")
        if state["error"]:
            raise ApiError(500, "training_failed", f"training failed: {state['error']}")
        last = state["last_step"]
        if state["steps"] >= step and state["running_since"] is None:
            metrics = last["metrics"] if last else {}
            if "reason" in metrics and not metrics.get("critic_warmup"):  # a warm-up step trains the critic only
                raise ApiError(409, "step_skipped", f"step {step} trained nothing: {metrics['reason']}")
            return metrics
        time.sleep(POLL_S)
    raise ApiError(504, "timeout", f"training step {step} did not finish within {STEP_TIMEOUT_S:g} s")


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None
