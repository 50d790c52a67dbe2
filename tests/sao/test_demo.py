"""`reef demo sao --compare`, briefly: every arm starts its daemon, asks the held-out questions before and after
training, trains, and prints its table, curve and held-out result; the arms get the same requests; and how a result
with its intervals reads."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from recipes.sao.examples.toy import task
from reef_cli.app import app
from reef_cli.demo_run import (
    TARGET_WINDOW,
    Arm,
    ArmRun,
    DaemonsAhead,
    InFlightRun,
    StepRow,
    arms,
    evaluate,
    reached,
    run_arm,
)
from reef_cli.demo_stats import change, difference, question_changes
from reef_cli.render.demo import curve_line, in_flight_table, result_json, sparkline, summary
from reef_client import ChatReply


@pytest.mark.timeout(900)  # three daemons load the model and answer the held-out questions, on shared cores
def test_the_demo_trains_every_arm_and_prints_their_tables(embedded_models: Path, tmp_path: Path) -> None:
    (tmp_path / "reef").mkdir()
    (tmp_path / "reef" / "models").symlink_to(embedded_models, target_is_directory=True)
    env = {"XDG_CACHE_HOME": str(tmp_path), "COLUMNS": "200"}
    args = ["demo", "sao", "--compare", "--steps", "2", "--group-size", "2", "--held-out", "1"]
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 0, result.output
    assert "SAO (batch 1)" in result.stdout and "GRPO (batch 2)" in result.stdout and "SAOx2 (batch 2)" in result.stdout
    assert "masked" in result.stdout and "avg10" in result.stdout and "EV" in result.stdout
    assert "SAO: 2 rollouts, 2 steps" in result.stdout and "GRPO: 2 rollouts, 1 steps" in result.stdout
    assert f"({len(task.HELD_OUT)} answers per evaluation)" in result.stdout
    assert result.stdout.count("held-out") >= 3 and "SAO - GRPO: held-out change" in result.stdout
    assert "SAO    seed 0  avg10 by step, 2 critic-only:" in result.stdout  # the default 2 warm-up steps


def test_held_out_questions_are_never_trained_on_and_are_the_same_for_every_arm() -> None:
    trained = {rollout.prompt.country for seed in range(20) for rollout in task.rollouts(seed, grouped=False)}
    held_out = task.evaluation(0)
    assert len(task.HELD_OUT) >= 12 and len(held_out) == len(task.HELD_OUT) * task.EVALUATION_SAMPLES >= 96
    assert trained and not trained & {item.prompt.country for item in held_out}
    assert held_out == task.evaluation(0) and held_out != task.evaluation(1)


def test_every_arm_gets_the_same_requests_sao_one_question_at_a_time() -> None:
    one_by_one, grouped = task.rollouts(3, 8, 4, grouped=False), task.rollouts(3, 8, 4, grouped=True)
    assert sorted(one_by_one, key=repr) == sorted(grouped, key=repr) and len(set(one_by_one)) == 32
    assert all(a.prompt != b.prompt for a, b in itertools.pairwise(one_by_one))
    assert all(len({r.prompt for r in grouped[i : i + 4]}) == 1 for i in range(0, 32, 4))  # one group a step
    assert all(len({r.prompt for r in one_by_one[i : i + 4]}) == 4 for i in range(0, 32, 4))  # SAO x4: 4 questions
    assert [(arm.label, arm.batch) for arm in arms(4, compare=True)] == [("SAO", 1), ("GRPO", 4), ("SAOx4", 4)]


def _run(seed: int, before: list[list[float]], after: list[list[float]]) -> ArmRun:
    rows = [StepRow(step, step, 1.0, average, None if step <= 2 else 0.1, 0.0, 1.0, "warm-up" if step <= 2 else None)
            for step, average in enumerate([0.0, 0.2, 0.5, 1.0], start=1)]  # fmt: skip
    return ArmRun(Arm("sao", "sao", 1, grouped=False), seed, rows, before, after, 10.0)


def test_the_result_reads_with_its_curve_and_intervals() -> None:
    assert sparkline([0.0, 0.5, 1.0, 2.0]) == "▁▅██"
    run = _run(0, [[0.0, 0.0], [1.0, 0.0]], [[1.0, 1.0], [1.0, 0.0]])
    assert run.changes == [1.0, 0.0] and (run.before_rate, run.after_rate) == (0.25, 0.75)
    assert curve_line(run).endswith("2 critic-only: ▁▂▅█  held-out 0.25 -> 0.75")
    assert "held-out 0.25 -> 0.75 (4 answers per evaluation), change +0.500 [+0.000, +1.000]" in summary([run])
    two = summary([run, _run(1, [[0.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]])])
    assert "change +0.250 [" in two and "over 2 seeds x questions); per seed 0: +0.50, 1: +0.00" in two


def test_intervals_exclude_zero_only_when_the_change_is_consistent() -> None:
    assert question_changes([[0.0, 1.0], [0.0, 0.0]], [[1.0, 1.0], [0.0, 1.0]]) == [0.5, 0.5]
    steady = [[0.2, 0.3, 0.1, 0.2, 0.25, 0.15] for _ in range(4)]
    assert change(steady).excludes_zero() and change(steady).low > 0
    noisy = [[0.5, -0.5, 0.25, -0.25, 0.0, 0.1] for _ in range(4)]
    assert not change(noisy).excludes_zero()
    same = difference(steady, steady)
    assert (same.value, same.low, same.high) == (0.0, 0.0, 0.0)
    json.dumps(change(steady).__dict__)


class _Starts:
    """A stand-in for the arms' daemons that logs when each starts and stops, and how many run at once."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.running = 0
        self.most = 0
        self.lock = threading.Lock()
        self.started: dict[str, threading.Event] = {}

    def event(self, key: str) -> threading.Event:
        with self.lock:
            return self.started.setdefault(key, threading.Event())

    @contextmanager
    def start(self, arm: Arm) -> Iterator[str]:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.log.append(f"start {arm.key}")
        self.event(arm.key).set()
        try:
            yield f"http://{arm.key}"
        finally:
            with self.lock:
                self.running -= 1
                self.log.append(f"stop {arm.key}")


def test_each_arms_daemon_starts_while_the_arm_before_it_runs() -> None:
    plan = arms(4, compare=True)
    starts = _Starts()
    with DaemonsAhead(plan, starts.start) as daemons:
        for arm, after in itertools.zip_longest(plan, plan[1:]):
            with daemons.take(arm) as url:
                assert url == f"http://{arm.key}"
                starts.log.append(f"run {arm.key}")
                if after is not None:  # the next arm's daemon starts while this arm runs
                    assert starts.event(after.key).wait(10)
    sao, grpo, batch4 = (arm.key for arm in plan)
    assert starts.log.index(f"start {grpo}") < starts.log.index(f"stop {sao}") < starts.log.index(f"run {grpo}")
    assert starts.log.index(f"start {batch4}") < starts.log.index(f"stop {grpo}") < starts.log.index(f"run {batch4}")
    assert starts.most == 2 and starts.running == 0 and len(starts.log) == 9


def test_a_daemon_started_ahead_for_an_arm_that_never_runs_is_stopped() -> None:
    plan = arms(4, compare=True)
    starts = _Starts()
    with pytest.raises(RuntimeError), DaemonsAhead(plan, starts.start) as daemons, daemons.take(plan[0]):
        assert starts.event(plan[1].key).wait(10)
        raise RuntimeError("the first arm failed")
    assert starts.running == 0 and f"start {plan[1].key}" in starts.log and f"stop {plan[1].key}" in starts.log
    with DaemonsAhead(plan, starts.start) as daemons, pytest.raises(ValueError), daemons.take(plan[1]):
        pass  # not the next arm planned


def test_the_asynchronous_variant_reports_when_its_window_of_rewards_reaches_the_target() -> None:
    rewards = [0.0] * 30 + [1.0] * 7 + [0.0] * 5
    assert reached(rewards, 0.35) == 37 and reached(rewards, 0.4) is None  # 7 right in the last 20 of 37
    assert reached([1.0] * (TARGET_WINDOW - 1), 0.1) is None  # never over a part window
    sao = Arm("sao", "sao", 1, grouped=False)
    scored_at = [float(n) for n in range(1, len(rewards) + 1)]
    run = InFlightRun(sao, 0, 4, 0.35, scored_at[36], 37, 50.0, len(rewards), 42, {}, rewards, scored_at)
    assert (run.mean_reward, run.final_average) == (7 / 42, 0.35)
    table = in_flight_table([run])
    assert table.title is not None and "avg20 >= 0.35" in str(table.title)
    cells = [next(iter(column.cells)) for column in table.columns]
    assert cells[:5] == ["SAO", "0", "37", "37", "50"] and "0.35" in cells
    shown = result_json({}, [run], {}, 50.0)["in_flight"][0]
    assert (shown["arm"], shown["seconds_to_target"], shown["rollouts_to_target"]) == ("sao", 37.0, 37)


def test_the_result_carries_where_each_arms_time_went() -> None:
    run = ArmRun(Arm("sao", "sao", 1, grouped=False), 0, [], [[1.0]], [[0.0]], 9.0, {"daemon": 2.0, "training": 7.0})
    assert result_json({"sao": [run]}, [], {}, 9.0)["arms"]["sao"]["seeds"][0]["phases"] == run.phases


class _LoraDaemon:
    """A stand-in for a weight recipe's daemon: each scored report is a training step of the adapter of the scenario
    it was sent in, and an adapter is served only in its own scenario, where it names every capital."""

    def __init__(self) -> None:
        self.steps: dict[str, int] = {}
        self.lock = threading.Lock()

    def connect(self) -> _LoraClient:
        return _LoraClient(self)


class _LoraClient:
    def __init__(self, daemon: _LoraDaemon) -> None:
        self.daemon = daemon

    def __enter__(self) -> _LoraClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        pass

    def chat(self, scenario: str, messages: list[dict[str, str]], **params: object) -> ChatReply:
        asked = messages[-1]["content"]
        capital = next(c for country, c in task.CAPITALS.items() if task.QUESTION.format(country=country) == asked)
        trained = self.daemon.steps.get(scenario, 0) > 0
        return ChatReply(f"record-{scenario}-{params['seed']}", capital if trained else "I do not know.")

    def report(self, scenario: str, references: list[str], *, score: float) -> None:
        with self.daemon.lock:
            self.daemon.steps[scenario] = self.daemon.steps.get(scenario, 0) + 1

    def status(self) -> dict[str, object]:
        scenarios = {
            name: {"ineligible": {}, "error": None, "steps": steps, "running_since": None, "last_step": None}
            for name, steps in self.daemon.steps.items()
        }
        return {"training": {"scenarios": scenarios}}


def test_a_trained_adapter_shows_its_change_in_the_demos_evaluation() -> None:
    daemon = _LoraDaemon()
    items = task.evaluation(0, samples=1)
    before = evaluate(daemon.connect, items, lambda done: None)
    rows = run_arm(daemon.connect, Arm("sao", "sao", 1, grouped=False), task.rollouts(0, 2, 1, grouped=False),
                   lambda row: None)  # fmt: skip
    after = evaluate(daemon.connect, items, lambda done: None)
    run = ArmRun(Arm("sao", "sao", 1, grouped=False), 0, rows, before, after)
    assert len(rows) == 2 and (run.before_rate, run.after_rate) == (0.0, 1.0)
    assert change([run.changes]).low > 0
