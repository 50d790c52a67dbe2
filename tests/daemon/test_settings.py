"""Settings: precedence, file formats, errors that name the setting, secrets masked."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from reef_cli.app import app
from reef_daemon.setting_kinds import SettingsError
from reef_daemon.settings import CORE_SECTIONS, catalogue, load_settings


def test_precedence_command_line_over_file_over_environment(tmp_path: Path) -> None:
    config = tmp_path / "reef.toml"
    config.write_text('[reef]\nport = 9100\nhost = "127.0.0.2"\n[inference]\nupstream-url = "http://file:1"\n')
    environ = {"REEF_UPSTREAM_URL": "http://env:2", "REEF_UPSTREAM_MODEL": "env-model", "REEF_TOKEN": "t"}
    settings = load_settings(config_file=config, overrides={"reef.port": "9200"}, environ=environ)
    assert settings.reef.port == 9200 and settings.sources["reef.port"] == "command line"
    assert settings.reef.host == "127.0.0.2" and settings.sources["reef.host"] == "file"
    assert settings.inference.upstream_url == "http://file:1"
    assert settings.inference.upstream_model == "env-model"
    assert settings.sources["inference.upstream-model"] == "environment (REEF_UPSTREAM_MODEL)"
    assert settings.reef.state_dir == Path(".reef") and "reef.state-dir" not in settings.sources
    assert settings.accepted_tokens == ("t",)


def test_yaml_and_toml_take_the_same_keys(tmp_path: Path) -> None:
    toml = tmp_path / "a.toml"
    toml.write_text('recipe = "record"\n[inference]\ntimeout_s = 12\nupstream-url = "http://h:1/v1/"\n')
    yaml = tmp_path / "a.yaml"
    yaml.write_text("recipe: record\ninference:\n  timeout-s: 12\n  upstream_url: http://h:1/v1/\n")
    for path in (toml, yaml):
        settings = load_settings(config_file=path, environ={})
        assert settings.inference.timeout_s == 12.0
        assert settings.inference.upstream_url == "http://h:1"  # clients send /v1 themselves


runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--reef.prot", "1"], "unknown setting '--reef.prot' (did you mean reef.port?)"),
        (["--reef.prot=1"], "unknown setting '--reef.prot' (did you mean reef.port?)"),
        (["--reef.port", "http"], "bad value for reef.port (from command line): expected a whole number"),
        (["--reef.port", "70000"], "from 0 to 65535"),
        (["--inference.timeout-s", "-1"], "expected a positive number"),
        (["--inference.upstream-url", "ftp://x"], "expected an http:// or https:// URL"),
        (["--inference.upstream-url", "http://user:pw@x"], "REEF_UPSTREAM_API_KEY"),
        (["--reef.port"], "setting reef.port needs a value, as in --reef.port VALUE"),
        (["9200"], "unexpected argument '9200'; settings look like --reef.port 8900"),
        (["--reports.score-max", "0"], "reports.score-min (0) must be below reports.score-max (0)"),
        (["--reports.score-min", "nan"], "bad value for reports.score-min (from command line): expected a finite"),
    ],
)
def test_errors_name_the_setting(args: list[str], words: str) -> None:
    result = runner.invoke(app, ["serve", "--print-config", *args], env={})
    assert result.exit_code == 2
    assert result.output.startswith("reef serve: ") and words in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_bad_file_names_the_problem(tmp_path: Path) -> None:
    config = tmp_path / "reef.yaml"
    config.write_text("reef:\n  port: [\n")
    with pytest.raises(SettingsError, match=r"is not valid yaml"):
        load_settings(config_file=config, environ={})
    config.write_text("reef:\n  colour: blue\n")
    with pytest.raises(SettingsError, match=r"unknown setting 'reef\.colour'"):
        load_settings(config_file=config, environ={})


def test_print_config_masks_secrets_and_says_where_values_came_from(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["serve", "--print-config", "--reef.port", "9300", "--inference.upstream-url", "http://h:1"],
        env={"REEF_TOKEN": "super-secret-value", "REEF_UPSTREAM_API_KEY": "sk-also-secret"},
    )
    assert result.exit_code == 0, result.output
    assert "super-secret-value" not in result.output and "sk-also-secret" not in result.output
    lines = {line.split("│")[1].strip(): line for line in result.output.splitlines() if line.count("│") >= 3}
    assert "9300" in lines["reef.port"] and "command line" in lines["reef.port"]
    assert "****" in lines["reef.token"] and "REEF_TOKEN" in lines["reef.token"]
    assert "default" in lines["reef.host"] and "127.0.0.1" in lines["reef.host"]


def test_both_flag_forms_and_any_spelling_of_a_key_reach_the_setting() -> None:
    args = ["--reef.port=9301", "--Reef.State_Dir", "/tmp/reef-x", "--recipe", "record"]
    result = runner.invoke(app, ["serve", "--print-config", *args], env={})
    assert result.exit_code == 0, result.output
    lines = {line.split("│")[1].strip(): line for line in result.output.splitlines() if line.count("│") >= 3}
    assert "9301" in lines["reef.port"] and "command line" in lines["reef.port"]
    assert "/tmp/reef-x" in lines["reef.state-dir"] and "command line" in lines["reef.state-dir"]
    assert "command line" in lines["recipe"]


@pytest.mark.parametrize("command", ["serve", "start"])
def test_help_lists_every_setting_with_its_help(command: str) -> None:
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "240"})
    assert result.exit_code == 0, result.output
    # Rich wraps long help over lines inside a box; read it as one run of words.
    text = " ".join(result.output.replace("│", " ").split())
    for key, info in catalogue().items():
        assert f"--{key} {info.kind.metavar} {' '.join(info.help.split())}" in text, key
        if info.env:
            assert info.env in text


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--reef.port", "nope"], "reef.port"),
        (["--recipe", "sparkle"], "unknown recipe 'sparkle'; accepted: record"),
        (["--recipe", "sao2"], "unknown recipe 'sao2' (did you mean sao?); accepted: record"),
        (["--recipe", "os:path"], "is not a recipe class"),
        (["--recipe", "no_such_pkg.mod:Cls"], "cannot import recipe module"),
        (["--bogus.key", "1"], "unknown setting"),
        (["--reports.min-agreement", "1.5"], "expected a Cohen's kappa, from -1 (always opposite) to 1"),
    ],
)
def test_serve_refuses_bad_settings_with_one_line_and_exit_2(args: list[str], words: str) -> None:
    result = runner.invoke(app, ["serve", *args, "--inference.upstream-url", "http://h:1"], env={})
    assert result.exit_code == 2
    assert words in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_recipe_profile_sits_below_everything_the_user_sets(tmp_path: Path) -> None:
    from reef_daemon.recipe_host import load_serving_settings

    overrides = {"recipe": "tests.support.counting_recipe:ProfiledRecipe"}
    settings = load_serving_settings(config_file=None, overrides=overrides, environ={})
    assert settings.reef.port == 8901 and settings.sources["reef.port"] == "recipe profile"
    assert settings.reef.state_dir == Path(".reef/profiled")
    chosen = load_serving_settings(config_file=None, overrides={**overrides, "reef.port": "9000"}, environ={})
    assert chosen.reef.port == 9000 and chosen.reef.state_dir == Path(".reef/profiled")


def test_a_built_in_recipe_is_named_in_any_case() -> None:
    from reef_daemon.recipe_host import resolve_recipe

    assert resolve_recipe("Record") is resolve_recipe("record")
    result = runner.invoke(app, ["serve", "--recipe", "RECORD", "--print-config"], env={})
    assert result.exit_code == 0, result.output


def test_print_config_shows_the_answer_cap_reefine_uses_with_the_embedded_model() -> None:
    embedded = runner.invoke(app, ["serve", "--recipe", "reefine", "--print-config"], env={})
    assert embedded.exit_code == 0, embedded.output
    row = next(line for line in embedded.output.splitlines() if "harness.max-tokens" in line)
    assert "512" in row and "8192" not in row and "recipe reefine" in row
    upstream = runner.invoke(
        app, ["serve", "--recipe", "reefine", "--inference.upstream-url", "http://h:1", "--print-config"], env={}
    )
    row = next(line for line in upstream.output.splitlines() if "harness.max-tokens" in line)
    assert "8192" in row and "default" in row


SPARKLE = "tests.daemon.sectioned_recipe:SparkleRecipe"


def test_a_recipe_named_by_reference_brings_its_own_settings_section(tmp_path: Path) -> None:
    from reef_daemon.recipe_host import load_serving_settings, resolve_recipe
    from tests.daemon.sectioned_recipe import SparkleSection

    given = load_serving_settings(config_file=None, overrides={"recipe": SPARKLE, "sparkle.depth": "5"}, environ={})
    assert given.of(SparkleSection).depth == 5 and given.sources["sparkle.depth"] == "command line"
    assert resolve_recipe(given.recipe)(given).depth == 5  # type: ignore[attr-defined]
    config = tmp_path / "reef.toml"
    config.write_text(f'recipe = "{SPARKLE}"\n[sparkle]\ndepth = 7\n')
    assert load_serving_settings(config_file=config, overrides={}, environ={}).of(SparkleSection).depth == 7
    from_env = load_serving_settings(config_file=None, overrides={"recipe": SPARKLE}, environ={"SPARKLE_DEPTH": "9"})
    assert from_env.of(SparkleSection).depth == 9
    defaults = load_serving_settings(config_file=None, overrides={"recipe": SPARKLE}, environ={})
    assert defaults.of(SparkleSection).depth == 3
    with pytest.raises(SettingsError, match=r"unknown setting 'sparkle\.depth'"):
        load_serving_settings(config_file=None, overrides={"sparkle.depth": "5"}, environ={})

    shown = runner.invoke(app, ["serve", "-c", str(config), "--print-config"], env={})
    assert shown.exit_code == 0, shown.output
    row = next(line for line in shown.output.splitlines() if "sparkle.depth" in line)
    assert "7" in row and "file" in row


def test_a_recipe_section_may_not_take_a_name_reef_uses() -> None:
    from tests.daemon.sectioned_recipe import ClashingSection

    with pytest.raises(SettingsError, match="'reef' is already a section"):
        load_settings(environ={}, recipe_sections={"reef": ClashingSection})


def test_the_built_in_recipes_declare_the_training_and_slime_sections_beside_the_daemons_harness_section() -> None:
    from reef_daemon.builtin_recipes import builtin_sections

    assert set(builtin_sections()) == {"training", "slime"}
    assert "harness" in CORE_SECTIONS
    keys = catalogue()
    assert keys["harness.adapter"].env == "REEF_HARNESS_ADAPTER" and keys["training.batch-size"].default == 1
    assert keys["slime.ray-port"].default == 6379
