"""`reef demo sao`: watch the embedded model learn the toy task from scored rollouts, optionally beside GRPO."""

from __future__ import annotations

import os
import time
from contextlib import AbstractContextManager, ExitStack, nullcontext
from typing import Annotated, Any

import typer
from rich.columns import Columns
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from recipes.sao.examples.toy import task
from reef_cli.daemon_process import StartFailed
from reef_cli.demo_run import (
    IN_FLIGHT_TARGET,
    MOVING_WINDOW,
    REQUEST_TIMEOUT_S,
    TARGET_WINDOW,
    Arm,
    ArmRun,
    DaemonsAhead,
    InFlightRun,
    Scores,
    StepRow,
    arms,
    demo_daemon,
    evaluate,
    run_arm,
    run_in_flight,
)
from reef_cli.options import JsonOption, TokenOption
from reef_cli.output import console, error_console, fail, print_json
from reef_cli.render.demo import (
    curve_line,
    difference_line,
    differences,
    in_flight_table,
    result_json,
    step_line,
    steps_table,
    summary,
)
from reef_client import ReefClient, ReefClientError
from reef_contract import TOKEN_ENV

EXAMPLE = "Example: reef demo sao --compare --seeds 8"
app = typer.Typer(name="demo", help="Demonstrations on the embedded model.", epilog=EXAMPLE, no_args_is_help=True)


@app.command("sao", epilog=EXAMPLE)
def sao(
    compare: Annotated[
        bool,
        typer.Option(
            "--compare", help="Also run GRPO, and SAO with as many steps as GRPO, on the same questions and seeds."
        ),
    ] = False,
    steps: Annotated[
        int | None,
        typer.Option(
            "--steps",
            min=2,
            help=f"Training rollouts per arm (SAO: one a step): --steps / --group-size questions. [default:"
            f" {task.PROMPTS * task.GROUP}; with --in-flight, every training question's group,"
            f" {len(task.training_countries()) * task.GROUP}]",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Draws the questions and the sampling seeds.")] = 0,
    seeds: Annotated[
        int, typer.Option("--seeds", min=1, help="Repeat with seeds --seed, --seed+1, ...: intervals over seeds.")
    ] = 1,
    group_size: Annotated[
        int, typer.Option("--group-size", min=2, help="Rollouts of each training question (GRPO's group).")
    ] = task.GROUP,
    held_out: Annotated[
        int, typer.Option("--held-out", min=1, help="Samples of each held-out question, before and after training.")
    ] = task.EVALUATION_SAMPLES,
    in_flight: Annotated[
        int,
        typer.Option(
            "--in-flight",
            min=0,
            help="Instead: keep N requests open while steps run (rollouts of older weights train too) and time how"
            " long each arm takes to reach --target.",
        ),
    ] = 0,
    target: Annotated[
        float,
        typer.Option(
            "--target",
            min=0.0,
            max=1.0,
            help=f"With --in-flight: the mean training reward over {TARGET_WINDOW} rollouts in a row to reach.",
        ),
    ] = IN_FLIGHT_TARGET,
    json: JsonOption = False,
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
    ~/.cache/reef), asks held-out questions (never trained on) before and after training, sends each training
    question through the proxy at temperature 1 with its own seed, reports the score, and shows each step. Every arm
    gets the same requests: SAO one at a time, round-robin over the questions; with --compare, GRPO one question's
    group a step, and SAO with --group-size rollouts a step (as many steps as GRPO). The result is the held-out
    change per arm with a 95 % interval, and the differences between arms.
    """
    if url is not None and (compare or seeds > 1 or in_flight):
        fail("--compare, --seeds and --in-flight start daemons of their own; drop --url", 2)
    if steps is None:
        steps = (len(task.training_countries()) if in_flight else task.PROMPTS) * group_size
    if steps % group_size:
        fail(
            f"--steps ({steps}) must be a multiple of --group-size ({group_size}): each question is asked that often", 2
        )
    prompts = steps // group_size
    if prompts > len(task.training_countries()):
        fail(f"--steps / --group-size asks for {prompts} questions; the task has {len(task.training_countries())}", 2)
    chosen = arms(group_size, compare)
    if in_flight:
        chosen = [arm for arm in chosen if arm.batch == 1 or arm.grouped]  # SAO and GRPO
    token = token or os.environ.get(TOKEN_ENV)
    began = time.perf_counter()
    settings: dict[str, Any] = {
        "steps": steps, "group_size": group_size, "questions": prompts, "seed": seed, "seeds": seeds,
        "held_out": list(task.HELD_OUT), "samples": held_out, "in_flight": in_flight, "target": target,
        "training": task.SETTINGS,
    }  # fmt: skip
    progress = Progress(
        TextColumn("{task.description:<16}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        console=error_console(),
    )
    by_arm: dict[str, list[ArmRun]] = {arm.key: [] for arm in chosen}
    async_runs: list[InFlightRun] = []
    with ExitStack() as stack, progress:
        daemons = None
        if url is None and not in_flight:  # each arm's daemon loads the model while the arm before it runs
            daemons = stack.enter_context(DaemonsAhead([arm for _ in range(seed, seed + seeds) for arm in chosen]))
        bars = {
            (arm.key, number): progress.add_task(
                f"{arm.label} seed {number}", total=steps // arm.batch, info="waiting", start=False
            )
            for number in range(seed, seed + seeds)
            for arm in chosen
        }
        for number in range(seed, seed + seeds):
            plans = {grouped: task.rollouts(number, prompts, group_size, grouped=grouped) for grouped in (False, True)}
            items = task.evaluation(number, held_out)
            before: Scores | None = None
            for arm in chosen:
                bar = bars[arm.key, number]
                if in_flight:  # timed, so each arm starts its daemon alone: no load of another arm's model beside it
                    where: AbstractContextManager[str] = demo_daemon(arm, max_staleness=2 * in_flight)
                    async_runs.append(
                        _run_in_flight(progress, bar, arm, number, plans[arm.grouped], in_flight, target, where, token)
                    )
                    continue
                where = daemons.take(arm) if daemons is not None else nullcontext(url or "")
                run = _run(progress, bar, arm, number, plans[arm.grouped], items, before, where, token, quiet=json)
                before = run.before  # the weights as first served: one evaluation for every arm of the seed
                by_arm[arm.key].append(run)
    seconds = time.perf_counter() - began
    if json:
        print_json(result_json(by_arm if not in_flight else {}, async_runs, settings, seconds))
        return
    if in_flight:
        console().print(in_flight_table(async_runs))
        return
    tables = [steps_table(runs[0].arm, runs[0].rows) for runs in by_arm.values()]
    console().print(Columns(tables) if len(tables) > 1 else tables[0])
    for runs in by_arm.values():
        for run in runs:
            console().print(curve_line(run), soft_wrap=True)
    for runs in by_arm.values():
        console().print(summary(runs), soft_wrap=True)
    if len(by_arm) > 1:
        for name, estimate in differences(by_arm):
            console().print(difference_line(name, estimate), soft_wrap=True)
    console().print(f"{seconds / 60:.1f} min in all", style="dim")


def _run(
    progress: Progress,
    bar: TaskID,
    arm: Arm,
    seed: int,
    planned: list[task.Rollout],
    items: list[task.Rollout],
    before: Scores | None,
    daemon: AbstractContextManager[str],
    token: str | None,
    *,
    quiet: bool,
) -> ArmRun:
    """One arm for one seed on `daemon` (its URL): the held-out questions before (unless another arm of the seed
    asked them), the training rollouts, the held-out questions after; each part timed."""
    total = len(planned) // arm.batch
    began = time.perf_counter()
    phases: dict[str, float] = {}
    lap = [began]

    def timed(phase: str) -> None:
        now = time.perf_counter()
        phases[phase] = round(now - lap[0], 2)
        lap[0] = now

    def on_step(row: StepRow) -> None:
        progress.update(bar, advance=1, info=f"avg{MOVING_WINDOW} reward {row.moving_average:.2f}")
        if not quiet:
            progress.console.print(step_line(arm, row, total))

    def asked(phase: str) -> Any:
        return lambda done: progress.update(bar, info=f"held-out {phase} {done}/{len(items)}")

    progress.start_task(bar)
    progress.update(bar, info="waiting for its daemon")
    try:
        with daemon as where, ReefClient(where, token, timeout_s=REQUEST_TIMEOUT_S) as client:
            timed("daemon")
            if client.status()["recipe"].get("name") != arm.recipe:
                fail(
                    f"the daemon at {where} does not run the {arm.recipe} recipe;"
                    f" start it with `reef start --recipe {arm.recipe}`"
                )

            def connect() -> ReefClient:
                return ReefClient(where, token, timeout_s=REQUEST_TIMEOUT_S)

            if before is None:
                before = evaluate(connect, items, asked("before"))
                timed("before")
            progress.update(bar, info="training")
            rows = run_arm(connect, arm, planned, on_step)
            timed("training")
            after = evaluate(connect, items, asked("after"))
            timed("after")
    except (ReefClientError, StartFailed) as exc:
        fail(f"the {arm.label} arm failed: {exc}")
    run = ArmRun(arm, seed, rows, before, after, time.perf_counter() - began, phases)
    progress.update(bar, info=f"held-out {run.before_rate:.2f} -> {run.after_rate:.2f}")
    return run


def _run_in_flight(
    progress: Progress,
    bar: TaskID,
    arm: Arm,
    seed: int,
    planned: list[task.Rollout],
    in_flight: int,
    target: float,
    daemon: AbstractContextManager[str],
    token: str | None,
) -> InFlightRun:
    progress.start_task(bar)
    progress.update(bar, total=len(planned), info="waiting for its daemon")
    try:
        with daemon as where:

            def connect() -> ReefClient:
                return ReefClient(where, token, timeout_s=REQUEST_TIMEOUT_S)

            def on_rollout(done: int, average: float) -> None:
                progress.update(bar, completed=done, info=f"avg{TARGET_WINDOW} reward {average:.2f}")

            progress.update(bar, info="training")
            return run_in_flight(connect, arm, planned, in_flight, target, seed, on_rollout)
    except (ReefClientError, StartFailed) as exc:
        fail(f"the {arm.label} arm failed: {exc}")
