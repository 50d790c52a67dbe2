"""What `reef demo sao` prints: one row per training step, each run's reward curve as a sparkline, per arm the
held-out pass rate before and after training with 95 % intervals, the differences between arms, and the whole
result as JSON."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rich.table import Table

from reef_cli.demo_run import MOVING_WINDOW, TARGET_WINDOW, Arm, ArmRun, InFlightRun, StepRow
from reef_cli.demo_stats import Estimate, change, difference

BLOCKS = "▁▂▃▄▅▆▇█"


def _loss(row: StepRow) -> str:
    return row.note or "-" if row.loss is None else f"{row.loss:+.4f}"


def _maybe(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def step_line(arm: Arm, row: StepRow, steps: int) -> str:
    """One line per committed step, printed as the demo goes."""
    loss = row.note if row.loss is None else f"loss {row.loss:+.4f}"
    critic = "" if row.explained_variance is None else f"  critic EV {row.explained_variance:+.2f}"
    return (
        f"{arm.label:<6} step {row.step:>3}/{steps}  reward {row.reward:.2f}  "
        f"avg{MOVING_WINDOW} {row.moving_average:.2f}  {loss}{critic}  {row.seconds:.1f} s"
    )


def steps_table(arm: Arm, rows: list[StepRow]) -> Table:
    """Step, rollouts, reward, moving average, loss, masked fraction, the critic's explained variance and share of
    failed answers pushed up, and step time of one arm."""
    table = Table(title=f"{arm.label} (batch {arm.batch})", title_justify="left")
    for column in ("step", "rollouts", "reward", f"avg{MOVING_WINDOW}", "loss", "masked", "EV", "fail+", "s"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            str(row.step),
            str(row.rollouts),
            f"{row.reward:.2f}",
            f"{row.moving_average:.2f}",
            _loss(row),
            _maybe(row.masked_fraction, ".3f"),
            _maybe(row.explained_variance, "+.2f"),
            _maybe(row.failed_positive_share, ".2f"),
            f"{row.seconds:.1f}",
        )
    return table


def sparkline(values: list[float]) -> str:
    """Rewards from 0 to 1 as one block character each, low to high."""
    top = len(BLOCKS) - 1
    return "".join(BLOCKS[round(min(max(value, 0.0), 1.0) * top)] for value in values)


def curve_line(run: ArmRun) -> str:
    """The arm's reward curve (the moving average after each step) and its held-out pass rate before and after."""
    curve = sparkline([row.moving_average for row in run.rows])
    critic_only = sum(1 for row in run.rows if row.loss is None)
    note = f", {critic_only} critic-only" if critic_only else ""
    return (
        f"{run.arm.label:<6} seed {run.seed}  avg{MOVING_WINDOW} by step{note}: {curve}  "
        f"held-out {run.before_rate:.2f} -> {run.after_rate:.2f}"
    )


def _answers(run: ArmRun) -> int:
    return sum(len(per_question) for per_question in run.after)


def summary(runs: list[ArmRun]) -> str:
    """The arm's held-out pass rate before and after, and the change with its 95 % interval (bootstrap over the
    held-out questions, and over seeds when there are several); each seed's change when there are several."""
    if not runs:
        return "no runs"
    label, rows = runs[0].arm.label, runs[0].rows
    before = sum(run.before_rate for run in runs) / len(runs)
    after = sum(run.after_rate for run in runs) / len(runs)
    seconds = sum(run.seconds for run in runs) / len(runs)
    estimate = change([run.changes for run in runs])
    steps = f"{rows[-1].rollouts if rows else 0} rollouts, {len(rows)} steps, {seconds:.0f} s a seed"
    answers = f"{_answers(runs[0])} answers per evaluation"
    line = f"{label}: {steps}; held-out {before:.2f} -> {after:.2f} ({answers}), change {estimate.text()}"
    if len(runs) == 1:
        return f"{line} (95 % interval over questions; one seed: --seeds 8 for the spread)"
    per_seed = ", ".join(f"{run.seed}: {change([run.changes]).value:+.2f}" for run in runs)
    return f"{line} (95 % interval over {len(runs)} seeds x questions); per seed {per_seed}"


def differences(by_arm: dict[str, list[ArmRun]]) -> list[tuple[str, Estimate]]:
    """Each other arm's change minus SAO's first arm's, paired by seed and question."""
    keys = list(by_arm)
    first = keys[0]
    return [
        (
            f"{by_arm[first][0].arm.label} - {by_arm[key][0].arm.label}",
            difference([r.changes for r in by_arm[first]], [r.changes for r in by_arm[key]]),
        )
        for key in keys[1:]
    ]


def difference_line(name: str, estimate: Estimate) -> str:
    verdict = "interval excludes 0" if estimate.excludes_zero() else "within noise (interval holds 0)"
    return f"{name}: held-out change {estimate.text()} ({verdict}; bootstrap over seeds x questions)"


def in_flight_table(runs: list[InFlightRun]) -> Table:
    """Per arm and seed of the asynchronous variant: wall time to reach the target reward, and what was trained."""
    first = runs[0]
    table = Table(
        title=f"{first.in_flight} requests in flight: seconds until avg{TARGET_WINDOW} >= {first.target:g}",
        title_justify="left",
    )
    columns = (
        "arm",
        "seed",
        "to target s",
        "at rollout",
        "total s",
        "rollouts",
        "mean reward",
        f"last {TARGET_WINDOW}",
    )
    for column in (*columns, "steps", "too old"):
        table.add_column(column, justify="left" if column == "arm" else "right")
    for run in runs:
        table.add_row(
            run.arm.label,
            str(run.seed),
            "not reached" if run.seconds_to_target is None else f"{run.seconds_to_target:.0f}",
            "-" if run.rollouts_to_target is None else str(run.rollouts_to_target),
            f"{run.seconds:.0f}",
            str(run.rollouts),
            f"{run.mean_reward:.2f}",
            f"{run.final_average:.2f}",
            str(run.steps),
            str(sum(run.ineligible.values())),
        )
    return table


def _estimate(estimate: Estimate) -> dict[str, float]:
    return {"value": estimate.value, "low": estimate.low, "high": estimate.high}


def result_json(
    by_arm: dict[str, list[ArmRun]], in_flight: list[InFlightRun], settings: dict[str, Any], seconds: float
) -> dict[str, Any]:
    """The whole result: per arm and seed, before, after, the answers counted and the intervals; the differences;
    the asynchronous runs."""
    arms: dict[str, Any] = {}
    for key, runs in by_arm.items():
        arms[key] = {
            "label": runs[0].arm.label,
            "recipe": runs[0].arm.recipe,
            "batch": runs[0].arm.batch,
            "grouped": runs[0].arm.grouped,
            "change": _estimate(change([run.changes for run in runs])),
            "seeds": [
                {
                    "seed": run.seed,
                    "before": run.before_rate,
                    "after": run.after_rate,
                    "answers": _answers(run),
                    "change": _estimate(change([run.changes])),
                    "before_scores": run.before,
                    "after_scores": run.after,
                    "seconds": run.seconds,
                    "phases": run.phases,
                    "steps": [asdict(row) for row in run.rows],
                }
                for run in runs
            ],
        }
    return {
        "settings": settings,
        "arms": arms,
        "differences": [{"arms": name, **_estimate(estimate)} for name, estimate in differences(by_arm)]
        if len(by_arm) > 1
        else [],
        "in_flight": [
            {**asdict(run), "arm": run.arm.key, "mean_reward": run.mean_reward, "final_average": run.final_average}
            for run in in_flight
        ],
        "seconds": seconds,
    }
