"""Completion scripts (current, loadable, completing) and the help of every command."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.core import TyperGroup
from typer.main import get_command
from typer.testing import CliRunner

from reef_cli.app import app
from reef_daemon import __version__
from reef_daemon.settings import catalogue
from tests.support.cli_testing import Daemon

COMPLETIONS = Path(__file__).resolve().parents[2] / "completions"
FILES = {"bash": "reef.bash", "zsh": "_reef", "fish": "reef.fish"}


@pytest.mark.parametrize("shell", sorted(FILES))
def test_the_completion_files_are_current(shell: str) -> None:
    generated = CliRunner().invoke(app, ["completion", shell])
    assert generated.exit_code == 0, generated.output
    stored = (COMPLETIONS / FILES[shell]).read_text()
    assert generated.stdout == stored, (
        f"completions/{FILES[shell]} is stale; regenerate it: reef completion {shell} > completions/{FILES[shell]}"
    )


def _bash_complete(*words: str, cwd: Path | None = None, **env: str) -> list[str]:
    line = " ".join(f"'{word}'" for word in words)
    script = f"""
        source '{COMPLETIONS / "reef.bash"}'
        complete -p reef >/dev/null
        COMP_WORDS=(reef {line}); COMP_CWORD={len(words)}
        _reef
        printf '%s\\n' "${{COMPREPLY[@]}}"
    """
    environment = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/"), **env}
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30, cwd=cwd, env=environment)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_bash_completes_subcommands_options_and_values() -> None:
    assert _bash_complete("sc") == ["score", "scenarios"]
    assert set(_bash_complete("")) >= {"start", "stop", "status", "records", "show", "score", "scenarios"}
    assert _bash_complete("scenarios", "") == ["create", "move", "archive"]
    assert _bash_complete("records", "--f") == ["--follow"]
    assert _bash_complete("records", "--type", "") == ["inference", "report", "request"]
    assert _bash_complete("completion", "") == ["bash", "zsh", "fish"]
    assert "--inference.upstream-url" in _bash_complete("start", "--inf")
    assert _bash_complete("serve", "--recipe", "") == ["record", "reefine", "sao", "grpo"]
    assert _bash_complete("start", "--harness.adapter", "") == ["pi", "codex", "dsh", "claude", "opencode"]
    assert _bash_complete("install", "--adapter", "") == ["pi", "codex", "dsh", "claude", "opencode"]
    assert _bash_complete("serve", "--embedded.engine", "") == ["torch", "sglang"]
    assert _bash_complete("start", "--training.trainer", "") == ["torch", "slime"]


def test_scenario_values_come_from_the_running_daemon_in_every_shell(daemon: Daemon, tmp_path: Path) -> None:
    daemon.chat("alpha")
    daemon.chat("beta")
    assert {"alpha", "beta"} <= set(_bash_complete("records", "--scenario", "", REEF_URL=daemon.url))
    assert "alpha" in _bash_complete("export", "-s", "al", cwd=daemon.workdir)  # the daemon `reef start` ran here
    assert _bash_complete("records", "--scenario", "", cwd=tmp_path, REEF_URL="http://127.0.0.1:9") == []
    if shutil.which("fish") is not None:
        script = COMPLETIONS / "reef.fish"
        env = {**os.environ, "REEF_URL": daemon.url}
        done = subprocess.run(["fish", "-c", f"source '{script}'; complete -C 'reef records --scenario '"],
                              capture_output=True, text=True, timeout=30, env=env)  # fmt: skip
        assert {"alpha", "beta"} <= {line.split("\t")[0] for line in done.stdout.splitlines()}, done.stderr


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_describes_an_option_once_not_each_of_its_values() -> None:
    script = COMPLETIONS / "reef.fish"
    done = subprocess.run(["fish", "-c", f"source '{script}'; complete -C 'reef export --format '"],
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    assert sorted(done.stdout.splitlines()) == ["openai", "preference", "tokens"], done.stdout
    options = subprocess.run(["fish", "-c", f"source '{script}'; complete -C 'reef export --fo'"],
                             capture_output=True, text=True, timeout=30)  # fmt: skip
    assert options.stdout.splitlines() == ["--format\tWhat to write: openai, preference or tokens."], options.stdout


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_the_zsh_script_parses() -> None:
    done = subprocess.run(["zsh", "-n", str(COMPLETIONS / "_reef")], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_the_fish_script_parses_and_completes() -> None:
    script = COMPLETIONS / "reef.fish"
    parsed = subprocess.run(["fish", "--no-execute", str(script)], capture_output=True, text=True, timeout=30)
    assert parsed.returncode == 0, parsed.stderr
    done = subprocess.run(
        ["fish", "-c", f"source '{script}'; complete -C 'reef scenarios '"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert [line.split("\t")[0] for line in done.stdout.splitlines()] == ["archive", "create", "move"]


def _command_paths() -> list[list[str]]:
    paths: list[list[str]] = [[]]
    root = get_command(app)
    assert isinstance(root, TyperGroup)
    for name, command in root.commands.items():
        paths.append([name])
        if isinstance(command, TyperGroup):
            paths += [[name, sub] for sub in command.commands]
    return paths


@pytest.mark.parametrize("path", _command_paths(), ids=lambda path: " ".join(path) or "reef")
def test_every_command_has_help_with_an_example(path: list[str]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Example" in result.stdout
    assert f"reef {' '.join(path)}".strip() in result.stdout
    assert "<bool>" not in result.stdout  # a flag takes no value
    usage = next(line for line in result.stdout.splitlines() if "Usage:" in line)
    assert "{" not in usage, usage  # arguments in capitals, [OPTIONAL] ones in brackets


def test_help_paragraphs_fill_the_width_instead_of_keeping_the_source_line_breaks() -> None:
    result = CliRunner().invoke(app, ["score", "--help"], env={"COLUMNS": "200"})
    assert "the valid ones are sent and each refused line is named with its number and reason" in result.stdout
    usage = CliRunner().invoke(app, ["import", "--help"], env={"COLUMNS": "200"}).stdout
    assert "Usage: reef import [OPTIONS] PATHS..." in usage


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"reef {__version__}"


def test_a_list_settings_default_is_shown_as_the_command_line_takes_it() -> None:
    result = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "400"})
    assert "(default: person,words,retry,interruption,tool-error,tests,next-turn,judge,outcome,import)" in result.stdout
    assert "('person'" not in result.stdout


@pytest.mark.parametrize("command", ["serve", "start"])
def test_every_setting_is_named_whole_in_the_help_at_80_columns(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    names = {word for line in lines for word in line.strip("│ ").split()[:1] if word.startswith("--")}
    assert {f"--{key}" for key in catalogue()} <= names
    helps = "".join(line.strip("│ ").split("  ")[-1].strip() for line in lines)  # the help column, lines joined
    assert "person,words,retry,interruption,tool-error,tests,next-turn,judge,outcome,import)" in helps  # folded
    assert "Example: reef" in result.stdout.split("settings ─")[-1]  # the example still comes last


@pytest.mark.parametrize("path", _command_paths(), ids=lambda path: " ".join(path) or "reef")
def test_at_80_columns_no_value_form_is_cut(path: list[str]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    cut = [line for line in lines if re.search(r"<[a-z][^<>]*$", line)]  # `<openai|preference|token` alone
    assert not cut, "\n".join(cut)
