"""What `reef demo sao` prints: one row per training step, each run's reward curve as a sparkline, and per arm the
held-out reward before and after training with its spread over seeds."""

from __future__ import annotations

import statistics

from rich.table import Table

from reef_cli.demo_run import MOVING_WINDOW, Arm, ArmRun, StepRow

BLOCKS = "▁▂▃▄▅▆▇█"


def step_line(arm: Arm, row: StepRow, steps: int) -> str:
    """One line per committed step, printed as the demo goes."""
    loss = "warm-up" if row.loss is None else f"loss {row.loss:+.4f}"
    return (
        f"{arm.label:<4} step {row.step:>3}/{steps}  reward {row.reward:.2f}  "
        f"avg{MOVING_WINDOW} {row.moving_average:.2f}  {loss}  {row.seconds:.1f} s"
    )


def steps_table(arm: Arm, rows: list[StepRow]) -> Table:
    """Step, rollouts, reward, moving average, loss, masked fraction and step time of one arm."""
    table = Table(title=f"{arm.label} (batch {arm.group})", title_justify="left")
    for column in ("step", "rollouts", "reward", f"avg{MOVING_WINDOW}", "loss", "masked", "s"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            str(row.step),
            str(row.rollouts),
            f"{row.reward:.2f}",
            f"{row.moving_average:.2f}",
            "warm-up" if row.loss is None else f"{row.loss:+.4f}",
            "-" if row.masked_fraction is None else f"{row.masked_fraction:.3f}",
            f"{row.seconds:.1f}",
        )
    return table


def sparkline(values: list[float]) -> str:
    """Rewards from 0 to 1 as one block character each, low to high."""
    top = len(BLOCKS) - 1
    return "".join(BLOCKS[round(min(max(value, 0.0), 1.0) * top)] for value in values)


def curve_line(run: ArmRun) -> str:
    """The arm's reward curve (the moving average after each step) and its held-out reward before and after."""
    curve = sparkline([row.moving_average for row in run.rows])
    warm = sum(1 for row in run.rows if row.loss is None)
    warm_up = f", the first {warm} critic warm-up" if warm else ""
    return (
        f"{run.arm.label:<4} seed {run.seed}  avg{MOVING_WINDOW} by step{warm_up}: {curve}  "
        f"held-out {run.before:.2f} -> {run.after:.2f}"
    )


def summary(runs: list[ArmRun]) -> str:
    """The arm's held-out reward before and after training, with its spread over the seeds run."""
    if not runs:
        return "no runs"
    label = runs[0].arm.label
    gains = [run.after - run.before for run in runs]
    before = statistics.fmean(run.before for run in runs)
    after = statistics.fmean(run.after for run in runs)
    rows = runs[0].rows
    seconds = sum(row.seconds for run in runs for row in run.rows) / len(runs)
    spread = (
        f"{statistics.fmean(gains):+.2f} ± {statistics.stdev(gains):.2f} (mean ± sd over {len(runs)} seeds)"
        if len(runs) > 1
        else f"{gains[0]:+.2f} (one seed; --seeds 3 shows the spread)"
    )
    steps = f"{rows[-1].rollouts if rows else 0} rollouts, {len(rows)} steps in {seconds:.0f} s"
    return f"{label}: {steps}; held-out reward {before:.2f} -> {after:.2f}, change {spread}"
