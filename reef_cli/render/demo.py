"""The tables `reef demo sao` prints: one row per training step, and a line per arm on how the reward moved."""

from __future__ import annotations

from rich.table import Table

from reef_cli.demo_run import MOVING_WINDOW, Arm, StepRow


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


def summary(arm: Arm, rows: list[StepRow]) -> str:
    """How the moving average moved from the first full window to the end."""
    if not rows:
        return f"{arm.label}: no steps"
    first = next((row for row in rows if row.rollouts >= MOVING_WINDOW), rows[-1])
    seconds = sum(row.seconds for row in rows)
    return (
        f"{arm.label}: {rows[-1].rollouts} rollouts, {len(rows)} steps in {seconds:.0f} s; "
        f"reward over the last {MOVING_WINDOW} rollouts {first.moving_average:.2f} (after {first.rollouts}) "
        f"-> {rows[-1].moving_average:.2f} (after {rows[-1].rollouts})"
    )
