"""`reef demo sao`: watch the embedded model learn the toy task from scored rollouts, optionally beside GRPO."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.columns import Columns
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from recipes.sao.examples.toy import task
from reef_cli.daemon_process import StartFailed
from reef_cli.demo_run import (
    MOVING_WINDOW,
    REQUEST_TIMEOUT_S,
    Arm,
    ArmPlan,
    ArmRun,
    StepRow,
    demo_daemon,
    run_plan,
)
from reef_cli.options import TokenOption
from reef_cli.output import console, error_console, fail
from reef_cli.render.demo import curve_line, step_line, steps_table, summary
from reef_client import ReefClient, ReefClientError
from reef_daemon.contract import TOKEN_ENV

EXAMPLE = "Example: reef demo sao --compare --steps 32 --seeds 3"
app = typer.Typer(name="demo", help="Demonstrations on the embedded model.", epilog=EXAMPLE, no_args_is_help=True)


@app.command("sao", epilog=EXAMPLE)
def sao(
    compare: Annotated[bool, typer.Option("--compare", help="Also run GRPO on the same prompts and seeds.")] = False,
    steps: Annotated[
        int, typer.Option("--steps", min=1, help="SAO steps, one rollout each; GRPO gets the same rollouts.")
    ] = 32,
    seed: Annotated[int, typer.Option("--seed", help="Draws the prompts and the sampling seeds.")] = 0,
    seeds: Annotated[
        int, typer.Option("--seeds", min=1, help="Repeat with seeds --seed, --seed+1, ...: the result's spread.")
    ] = 1,
    group_size: Annotated[
        int, typer.Option("--group-size", min=2, help="GRPO's group: rollouts of one prompt per step.")
    ] = 4,
    held_out: Annotated[
        int, typer.Option("--held-out", min=1, help="Samples of each held-out question, before and after training.")
    ] = task.EVALUATION_SAMPLES,
    url: Annotated[
        str | None,
        typer.Option(
            "--url", help="Use a daemon already serving --recipe sao instead of starting one.", show_default=False
        ),
    ] = None,
    token: TokenOption = None,
) -> None:
    """Train the embedded model to name capitals: each answer is scored by a rule and drives a training step.

    Starts its own daemon per arm and seed (a temporary state directory; the model cache is kept under
    ~/.cache/reef), asks held-out questions (never trained on) before and after training, sends each training prompt
    through the proxy at temperature 1 with its own seed, reports the score, and shows the reward per step. With
    --compare, GRPO gets the same rollouts, one group of --group-size per step (steps / group-size steps), and the
    same held-out questions.
    """
    if url is not None and (compare or seeds > 1):
        fail("--compare and --seeds start daemons of their own; drop --url", 2)
    if compare and steps < group_size:
        fail(f"--compare needs --steps of at least --group-size ({group_size}) for one GRPO step", 2)
    arms = [Arm("sao", 1)] + ([Arm("grpo", group_size)] if compare else [])
    group = group_size if compare else 1
    token = token or os.environ.get(TOKEN_ENV)
    runs: list[ArmRun] = []
    progress = Progress(
        TextColumn("{task.description:<12}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        console=error_console(),
    )
    with progress:
        plans = [
            (number, task.rollouts(number, steps, group), task.evaluation(number, held_out))
            for number in range(seed, seed + seeds)
        ]
        bars = {
            (arm, number): progress.add_task(
                f"{arm.label} seed {number}", total=len(planned) // arm.group, info="waiting", start=False
            )
            for number, planned, _items in plans
            for arm in arms
        }
        for number, planned, items in plans:
            for arm in arms:
                runs.append(_run(progress, bars[arm, number], ArmPlan(arm, number, planned, items), url, token))
    first = [run for run in runs if run.seed == seed]
    tables = [steps_table(run.arm, run.rows) for run in first]
    console().print(Columns(tables) if len(tables) > 1 else tables[0])
    for run in runs:
        console().print(curve_line(run), soft_wrap=True)
    for arm in arms:
        console().print(summary([run for run in runs if run.arm == arm]), soft_wrap=True)


def _run(progress: Progress, bar: TaskID, plan: ArmPlan, url: str | None, token: str | None) -> ArmRun:
    arm = plan.arm
    total = len(plan.rollouts) // arm.group

    def on_step(row: StepRow) -> None:
        progress.update(bar, advance=1, info=f"avg{MOVING_WINDOW} reward {row.moving_average:.2f}")
        progress.console.print(step_line(arm, row, total))

    progress.start_task(bar)
    progress.update(bar, info="starting its daemon" if url is None else "connecting")
    try:
        with _daemon(arm, url) as where, ReefClient(where, token, timeout_s=REQUEST_TIMEOUT_S) as client:
            if url is not None and client.status()["recipe"].get("name") != "sao":
                fail(f"the daemon at {url} does not run the sao recipe; start it with `reef start --recipe sao`")
            return run_plan(client, plan, lambda info: progress.update(bar, info=info), on_step)
    except (ReefClientError, StartFailed) as exc:
        fail(f"the {arm.label} arm failed: {exc}")


@contextmanager
def _daemon(arm: Arm, url: str | None) -> Iterator[str]:
    if url is not None:
        yield url
        return
    with demo_daemon(arm) as started:
        yield started
