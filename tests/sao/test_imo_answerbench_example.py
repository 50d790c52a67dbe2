"""The GPU example's configurations (recipes/sao/examples/imo_answerbench/) are valid reef settings: `reef serve -c
... --print-config` reads every key, and on a machine without Slime, SGLang and GPUs the run is refused with what to
install, never a traceback."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from recipes.sao.slime.contract import slime_flags
from reef_cli.app import app
from reef_daemon.settings import load_settings

EXAMPLE = Path(__file__).resolve().parents[2] / "recipes" / "sao" / "examples" / "imo_answerbench"


def rows(output: str) -> dict[str, tuple[str, str]]:
    """setting -> (value, source) from --print-config's table (single-line rows)."""
    found = {}
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.strip("│ ").split("│")]
        if len(cells) == 3 and cells[0]:
            found[cells[0]] = (cells[1], cells[2])
    return found


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("serve.toml", {"training.trainer": "slime", "embedded.engine": "sglang", "slime.actor-gpus": "1"}),
        ("serve-1gpu.toml", {"training.trainer": "torch", "training.device": "cuda", "training.adapter": "full"}),
        ("serve-1gpu-lora.toml", {"training.adapter": "lora", "training.lora-rank": "16", "embedded.engine": "sglang"}),
    ],
)
def test_print_config_reads_the_example(name: str, expected: dict[str, str]) -> None:
    result = CliRunner().invoke(app, ["serve", "-c", str(EXAMPLE / name), "--print-config"], env={})
    assert result.exit_code == 0, result.output
    table = rows(result.output)
    for key, value in expected.items():
        assert table[key] == (value, "file"), key
    assert table["recipe"] == ("sao", "file") and table["training.dis-high"] == ("5.0", "file")


def test_the_two_gpu_example_gives_slime_the_models_architecture(tmp_path: Path) -> None:
    settings = load_settings(config_file=EXAMPLE / "serve.toml", environ={})
    flags = slime_flags(settings, tmp_path)
    values = {flag: value for flag, value in itertools.pairwise(flags) if flag.startswith("--")}
    assert values["--num-layers"] == "28" and values["--num-query-groups"] == "2" and "--add-qkv-bias" in flags
    assert values["--global-batch-size"] == "1" and values["--num-rollout"] == "200"


def test_serving_the_two_gpu_example_here_is_refused_with_what_to_install(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "reef_cli", "serve", "-c", str(EXAMPLE / "serve.toml")]
    overrides = ["--reef.state-dir", str(tmp_path / "state"), "--reef.port", "0"]
    result = subprocess.run([*command, *overrides], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2
    assert "training.trainer = slime cannot start here; missing: Slime" in result.stderr
    assert "Traceback" not in result.stderr
