"""The arms of `reef demo sao`: a daemon on the embedded model with a weight recipe, fed the toy task's rollouts.

An arm talks to its daemon only as a client would: chat completions through the proxy, a score per answer through
`/reef/report`, and `/reef/status` to see each training step land. Every arm of a seed gets the same requests (the
same questions with the same sampling seeds), in its own order, and the same held-out questions before and after.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recipes.sao.examples.toy import task
from reef_cli.daemon_process import start_daemon, stop_daemon
from reef_cli.demo_stats import question_changes
from reef_cli.state import DaemonFiles
from reef_client import ApiError, ReefClient
from reef_daemon.runtimes.model_cache import user_model_cache

# The scenario every rollout and held-out question is asked in: a weight recipe serves its LoRA adapter only in the
# scenario it trains, so the held-out questions are asked there too (never scored, so never trained on).
SCENARIO = "toy"
MOVING_WINDOW = 10  # rollouts in the moving average of the reward
# With --in-flight: the moving average of the reward over TARGET_WINDOW rollouts to reach. The training questions'
# base rates (task.py) average 0.13; a model that learned nothing would still reach 0.35 over some 20 of its 56
# rollouts about 7 % of the time (over 10, 0.3: 71 %), so reaching it says something.
TARGET_WINDOW = 20
IN_FLIGHT_TARGET = 0.35
# Held-out questions asked at once: the embedded runtime decodes them in one batch, and a sequence's tokens do not
# depend on the batch it is in. On two cores 96 answers took 203 s four at a time, 100 s sixteen, 104 s thirty-two.
EVALUATION_WORKERS = 16
STEP_TIMEOUT_S = 600.0
POLL_S = 0.2
REQUEST_TIMEOUT_S = 300.0

Connect = Callable[[], ReefClient]  # a new client of the arm's daemon (one per thread)


@dataclass(frozen=True)
class Arm:
    """A recipe, how many rollouts make one of its steps, and whether a step's rollouts share one question."""

    key: str  # names the arm in --json
    recipe: str
    batch: int
    grouped: bool  # GRPO: a step is one question's group

    @property
    def label(self) -> str:
        return f"{self.recipe.upper()}" if self.batch == 1 or self.grouped else f"{self.recipe.upper()}x{self.batch}"


def arms(group: int, compare: bool) -> list[Arm]:
    """SAO (one rollout a step); with `compare`, GRPO (one group of `group` a step) and SAO taking as many steps as
    GRPO (`group` rollouts of different questions a step)."""
    sao = Arm("sao", "sao", 1, grouped=False)
    if not compare:
        return [sao]
    return [sao, Arm("grpo", "grpo", group, grouped=True), Arm(f"sao-batch{group}", "sao", group, grouped=False)]


@dataclass(frozen=True)
class StepRow:
    """One committed training step as the demo saw it."""

    step: int
    rollouts: int  # rollouts consumed so far by this arm
    reward: float  # mean reward of this step's rollouts
    moving_average: float  # mean reward of the last MOVING_WINDOW rollouts
    loss: float | None  # None when the policy did not move (critic warm-up, or every advantage 0)
    masked_fraction: float | None
    seconds: float  # wall time of the step: generation, scoring and training
    note: str | None = None  # "warm-up" or "no signal" when the policy did not move
    explained_variance: float | None = None  # the critic's, over its recent samples
    failed_positive_share: float | None = None


Scores = list[list[float]]  # per held-out question, per sample


@dataclass(frozen=True)
class ArmRun:
    """One arm's run for one seed: its steps, and its held-out scores before and after training."""

    arm: Arm
    seed: int
    rows: list[StepRow]
    before: Scores
    after: Scores
    seconds: float = 0.0
    # Wall seconds of each part of the run: "daemon" (waiting for its daemon to answer), "before" (the held-out
    # questions, when this arm asked them), "training", "after".
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def before_rate(self) -> float:
        return _rate(self.before)

    @property
    def after_rate(self) -> float:
        return _rate(self.after)

    @property
    def changes(self) -> list[float]:
        return question_changes(self.before, self.after)


def _rate(scores: Scores) -> float:
    flat = [score for per_question in scores for score in per_question]
    return sum(flat) / len(flat) if flat else 0.0


def model_cache() -> Path:
    """Where the demo's daemons keep the embedded model's safetensors cache: the user's, shared across runs."""
    return user_model_cache()


@contextmanager
def demo_daemon(arm: Arm, max_staleness: int = 0) -> Iterator[str]:
    """Run `reef serve --recipe <arm>` in the background on a temporary state directory; yield its URL."""
    with tempfile.TemporaryDirectory(prefix=f"reef-demo-{arm.key}-") as tmp:
        state = Path(tmp)
        cache = model_cache()
        cache.mkdir(parents=True, exist_ok=True)
        (state / "models").symlink_to(cache, target_is_directory=True)
        args = ["--recipe", arm.recipe, "--reef.state-dir", str(state), "--reef.port", "0"]
        args += ["--training.batch-size", str(arm.batch), "--training.max-staleness", str(max_staleness)]
        for key, value in (task.GRPO_SETTINGS if arm.recipe == "grpo" else task.SETTINGS).items():
            args += [f"--{key}", value]
        started = start_daemon(DaemonFiles(state), args, "127.0.0.1", 0)
        try:
            yield started.url
        finally:
            stop_daemon(started.pid)


class DaemonsAhead:
    """The daemons of a planned run of arms, in order, each started while the arm before it runs: an arm waits for
    its daemon (a process start and a model load) only when it is the first, or when the arm before it took less
    time than a start. One daemon is started ahead at most, so at most two run at once."""

    def __init__(self, plan: list[Arm], start: Callable[[Arm], AbstractContextManager[str]] | None = None) -> None:
        self._plan = deque(plan)
        self._start = start or demo_daemon
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="demo-daemon")
        self._ahead: tuple[Arm, Future[tuple[ExitStack, str]]] | None = None

    def _start_next(self) -> None:
        if self._ahead is None and self._plan:
            arm = self._plan.popleft()
            self._ahead = (arm, self._pool.submit(self._enter, arm))

    def _enter(self, arm: Arm) -> tuple[ExitStack, str]:
        with ExitStack() as stack:
            url = stack.enter_context(self._start(arm))
            return stack.pop_all(), url

    @contextmanager
    def take(self, arm: Arm) -> Iterator[str]:
        """The URL of `arm`'s daemon (the next one planned) once it answers; the one after it starts meanwhile.
        This one stops at the end of the block."""
        self._start_next()
        if self._ahead is None or self._ahead[0] != arm:
            raise ValueError(f"the {arm.label} arm is not the next one planned")
        stack, url = self._ahead[1].result()
        self._ahead = None
        with stack:
            self._start_next()
            yield url

    def __enter__(self) -> DaemonsAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop a daemon started ahead for an arm that did not run (the run failed or was interrupted)."""
        if self._ahead is not None:
            future = self._ahead[1]
            self._ahead = None
            if not future.cancel() and future.exception() is None:
                future.result()[0].close()
        self._pool.shutdown()


def evaluate(connect: Connect, items: list[task.Rollout], on_answer: Callable[[int], None]) -> Scores:
    """The served weights' scores on the held-out `items` in the trained scenario (sampled with their seeds, never
    scored, so never trained on), per question in `task.HELD_OUT` order, samples in the items' order.
    `on_answer(done)` after each answer."""
    done = [0]
    lock = threading.Lock()

    with _ThreadClients(connect) as clients, ThreadPoolExecutor(EVALUATION_WORKERS) as pool:

        def ask(item: task.Rollout) -> float:
            reward = _ask_and_score(clients.mine(), item)[1]
            with lock:
                done[0] += 1
                on_answer(done[0])
            return reward

        rewards = list(pool.map(ask, items))
    by_question: dict[str, list[float]] = {}
    for item, reward in zip(items, rewards, strict=True):
        by_question.setdefault(item.prompt.country, []).append(reward)
    return [by_question[country] for country in task.HELD_OUT if country in by_question]


def run_arm(
    connect: Connect, arm: Arm, planned: list[task.Rollout], on_step: Callable[[StepRow], None]
) -> list[StepRow]:
    """Send the planned rollouts `arm.batch` at a time (asked together, so decoded in one batch), score each, report
    them in the planned order, wait for the step they drive; one row each."""
    rewards: list[float] = []
    rows: list[StepRow] = []
    with _ThreadClients(connect) as clients, ThreadPoolExecutor(arm.batch) as pool, connect() as client:
        for start in range(0, len(planned) - arm.batch + 1, arm.batch):
            rows.append(_train_step(client, clients, pool, arm, planned[start : start + arm.batch], rewards, len(rows)))
            on_step(rows[-1])
    return rows


def _train_step(
    client: ReefClient,
    clients: _ThreadClients,
    pool: ThreadPoolExecutor,
    arm: Arm,
    batch: list[task.Rollout],
    rewards: list[float],
    done: int,
) -> StepRow:
    """Ask and score one step's rollouts, report them, and wait for the step; `rewards` gets theirs."""
    began = time.perf_counter()
    scores = list(pool.map(lambda rollout: _ask_and_score(clients.mine(), rollout), batch))
    for receipt, reward in scores:
        client.report(SCENARIO, [receipt], score=reward)
    rewards.extend(reward for _, reward in scores)
    metrics = _wait_for_step(client, done + 1)
    window = rewards[-MOVING_WINDOW:]
    note = "warm-up" if metrics.get("critic_warmup") else "no signal" if metrics.get("no_signal") else None
    return StepRow(
        step=done + 1,
        rollouts=len(rewards),
        reward=float(metrics.get("mean_reward", sum(r for _, r in scores) / len(scores))),
        moving_average=sum(window) / len(window),
        loss=_number(metrics.get("loss")),
        masked_fraction=_number(metrics.get("masked_fraction")),
        seconds=time.perf_counter() - began,
        note=note,
        explained_variance=_number(metrics.get("explained_variance")),
        failed_positive_share=_number(metrics.get("failed_positive_share")),
    )


@dataclass(frozen=True)
class InFlightRun:
    """An arm fed by `in_flight` clients at once (rollouts served by older weights while a step runs)."""

    arm: Arm
    seed: int
    in_flight: int
    target: float
    seconds_to_target: float | None  # None: the moving average never reached the target
    rollouts_to_target: int | None  # how many rollouts had been scored then
    seconds: float  # until every planned rollout was scored and trained on
    rollouts: int
    steps: int
    ineligible: dict[str, int]  # rollouts the daemon refused to train on (too old, mostly), by reason
    rewards: list[float]  # in the order they were scored
    scored_at: list[float]  # seconds from the start when each of them was scored

    @property
    def mean_reward(self) -> float:
        return sum(self.rewards) / len(self.rewards) if self.rewards else 0.0

    @property
    def final_average(self) -> float:
        """The moving average of the reward over the last TARGET_WINDOW rollouts."""
        window = self.rewards[-TARGET_WINDOW:]
        return sum(window) / len(window) if window else 0.0


def reached(rewards: list[float], target: float, window: int = TARGET_WINDOW) -> int | None:
    """How many rollouts had been scored when the moving average over the last `window` of them first reached
    `target` (a full window only); None when it never did."""
    for done in range(window, len(rewards) + 1):
        if sum(rewards[done - window : done]) / window >= target:
            return done
    return None


def run_in_flight(
    connect: Connect,
    arm: Arm,
    planned: list[task.Rollout],
    in_flight: int,
    target: float,
    seed: int,
    on_rollout: Callable[[int, float], None],
) -> InFlightRun:
    """Keep `in_flight` requests open (GRPO: `in_flight` groups) until every planned rollout is scored; the wall
    time (and the rollouts) until the moving average of the reward over TARGET_WINDOW rollouts first reaches
    `target`."""
    units = (
        [planned[start : start + arm.batch] for start in range(0, len(planned), arm.batch)]
        if arm.grouped
        else [[rollout] for rollout in planned]
    )
    lock = threading.Lock()
    rewards: list[float] = []
    scored_at: list[float] = []
    began = time.perf_counter()
    clients = _ThreadClients(connect)

    def work(unit: list[task.Rollout]) -> None:
        client = clients.mine()
        scored = [_ask_and_score(client, rollout) for rollout in unit]
        with lock:  # a group's reports go in together, so that one step holds the whole group
            for receipt, reward in scored:
                client.report(SCENARIO, [receipt], score=reward)
                rewards.append(reward)
                scored_at.append(round(time.perf_counter() - began, 2))
                window = rewards[-TARGET_WINDOW:]
                on_rollout(len(rewards), sum(window) / len(window))

    with clients, ThreadPoolExecutor(in_flight) as pool:
        list(pool.map(work, units))
    with connect() as client:
        state = _wait_until_drained(client, len(rewards), arm.batch)
    done = reached(rewards, target)
    return InFlightRun(
        arm,
        seed,
        in_flight,
        target,
        scored_at[done - 1] if done is not None else None,
        done,
        time.perf_counter() - began,
        len(rewards),
        int(state.get("steps", 0)),
        dict(state.get("ineligible") or {}),
        rewards,
        scored_at,
    )


class _ThreadClients:
    """One client of the daemon per thread, all closed at the end."""

    def __init__(self, connect: Connect) -> None:
        self._connect = connect
        self._local = threading.local()
        self._made: list[ReefClient] = []
        self._lock = threading.Lock()

    def mine(self) -> ReefClient:
        client: ReefClient | None = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = self._connect()
            with self._lock:
                self._made.append(client)
        return client

    def __enter__(self) -> _ThreadClients:
        return self

    def __exit__(self, *exc: object) -> None:
        for client in self._made:
            client.close()


def _ask_and_score(client: ReefClient, rollout: task.Rollout) -> tuple[str, float]:
    messages = [{"role": "user", "content": rollout.prompt.text}]
    reply = client.chat(SCENARIO, messages, temperature=1.0, seed=rollout.seed, max_tokens=task.MAX_TOKENS)
    if not reply.receipt:
        raise ApiError(200, "invalid_response", "the daemon sent no receipt (x-reef-agent-record-id)")
    return reply.receipt, task.score(rollout.prompt, reply.text)


def _training_state(client: ReefClient) -> dict[str, Any] | None:
    state = client.status()["training"]["scenarios"].get(SCENARIO)
    return dict(state) if state is not None else None


def _wait_for_step(client: ReefClient, step: int) -> dict[str, Any]:
    """The metrics of training step `step` once it is committed; fails when a report was refused for training."""
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while time.monotonic() < deadline:
        state = _training_state(client)
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
            metrics: dict[str, Any] = last["metrics"] if last else {}
            critic_only = metrics.get("critic_warmup") or metrics.get("no_signal")
            if "reason" in metrics and not critic_only:  # a critic-only step is a step; anything else failed
                raise ApiError(409, "step_skipped", f"step {step} trained nothing: {metrics['reason']}")
            return metrics
        time.sleep(POLL_S)
    raise ApiError(504, "timeout", f"training step {step} did not finish within {STEP_TIMEOUT_S:g} s")


def _wait_until_drained(client: ReefClient, posted: int, batch: int) -> dict[str, Any]:
    """Training's state once each of the `posted` reports is trained on, judged ineligible, or waits for a batch
    that will not fill, and no step runs."""
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while time.monotonic() < deadline:
        state = _training_state(client)
        if state is not None and state["error"]:
            raise ApiError(500, "training_failed", f"training failed: {state['error']}")
        if state is not None and state["running_since"] is None:
            judged = state["steps"] * batch + sum(state["ineligible"].values()) + state["waiting_units"]
            if judged >= posted and state["waiting_units"] < batch:
                return state
        time.sleep(POLL_S)
    raise ApiError(504, "timeout", f"training did not finish within {STEP_TIMEOUT_S:g} s")


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
