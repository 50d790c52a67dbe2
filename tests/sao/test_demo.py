"""`reef demo sao --compare`, briefly: both arms start their daemons, train, and print their tables."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from reef_cli.app import app


def test_the_demo_trains_both_arms_and_prints_their_tables(embedded_models: Path, tmp_path: Path) -> None:
    (tmp_path / "reef").mkdir()
    (tmp_path / "reef" / "models").symlink_to(embedded_models, target_is_directory=True)
    result = CliRunner().invoke(
        app,
        ["demo", "sao", "--compare", "--steps", "2", "--group-size", "2"],
        env={"XDG_CACHE_HOME": str(tmp_path), "COLUMNS": "160"},
    )
    assert result.exit_code == 0, result.output
    assert "SAO (batch 1)" in result.stdout and "GRPO (batch 2)" in result.stdout
    assert "masked" in result.stdout and "avg10" in result.stdout
    assert "SAO: 2 rollouts, 2 steps" in result.stdout
    assert "GRPO: 2 rollouts, 1 steps" in result.stdout
