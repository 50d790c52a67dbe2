"""`reef demo sao --compare`, briefly: both arms start their daemons, ask the held-out questions before and after
training, train, and print their tables, curves and held-out results; and how a result with its spread reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from recipes.sao.examples.toy import task
from reef_cli.app import app
from reef_cli.demo_run import Arm, ArmRun, StepRow
from reef_cli.render.demo import curve_line, sparkline, summary


@pytest.mark.timeout(600)  # two daemons load the model and answer 16 held-out questions, on shared cores
def test_the_demo_trains_both_arms_and_prints_their_tables(embedded_models: Path, tmp_path: Path) -> None:
    (tmp_path / "reef").mkdir()
    (tmp_path / "reef" / "models").symlink_to(embedded_models, target_is_directory=True)
    result = CliRunner().invoke(
        app,
        ["demo", "sao", "--compare", "--steps", "2", "--group-size", "2", "--held-out", "1"],
        env={"XDG_CACHE_HOME": str(tmp_path), "COLUMNS": "160"},
    )
    assert result.exit_code == 0, result.output
    assert "SAO (batch 1)" in result.stdout and "GRPO (batch 2)" in result.stdout
    assert "masked" in result.stdout and "avg10" in result.stdout
    assert "SAO: 2 rollouts, 2 steps" in result.stdout
    assert "GRPO: 2 rollouts, 1 steps" in result.stdout
    assert result.stdout.count("held-out reward") == 2 and "one seed; --seeds 3 shows the spread" in result.stdout
    assert "SAO  seed 0  avg10 by step, the first 2 critic warm-up:" in result.stdout


def test_held_out_questions_are_never_trained_on_and_are_the_same_for_both_arms() -> None:
    trained = {rollout.prompt.country for rollout in task.rollouts(0, 200, 4)}
    held_out = task.evaluation(0)
    assert trained and not trained & {item.prompt.country for item in held_out}
    assert held_out == task.evaluation(0) and held_out != task.evaluation(1)


def _run(seed: int, before: float, after: float) -> ArmRun:
    rows = [StepRow(step, step, 1.0, average, None if step <= 2 else 0.1, 0.0, 1.0) for step, average in
            enumerate([0.0, 0.2, 0.5, 1.0], start=1)]  # fmt: skip
    return ArmRun(Arm("sao", 1), seed, rows, before, after)


def test_the_result_reads_with_its_curve_and_spread() -> None:
    assert sparkline([0.0, 0.5, 1.0, 2.0]) == "▁▅██"
    assert curve_line(_run(0, 0.25, 0.75)).endswith("warm-up: ▁▂▅█  held-out 0.25 -> 0.75")
    runs = [_run(0, 0.25, 0.75), _run(1, 0.25, 0.25)]
    assert summary(runs).endswith("held-out reward 0.25 -> 0.50, change +0.25 ± 0.35 (mean ± sd over 2 seeds)")
