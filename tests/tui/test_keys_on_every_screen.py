"""What a screen offers is what it does: the palette finds every key the help lists, on every screen; the footer
keeps `q Quit` and `s Scenario` at 80 columns; the versions screen's canary keys are in the footer where they fit,
and in help and the palette at any width; the requests screen of a recipe that takes no change request says so
up front and offers no `n`."""

from __future__ import annotations

from typing import Any

import pytest
from textual.command import CommandList, CommandPalette
from textual.widgets._footer import FooterKey

from reef_tui import ReefApp
from reef_tui.screens.help import help_text
from reef_tui.screens.new_request import NewRequestScreen
from reef_tui.screens.requests import RequestsScreen
from reef_tui.screens.training import TrainingScreen
from reef_tui.screens.versions import VersionsScreen
from tests.support.tui_fixed import FixedClient
from tests.support.waiting import eventually


def fixed_app(recipe: str = "reefine", scenario: str | None = "demo") -> ReefApp:
    return ReefApp("http://127.0.0.1:8900", scenario=scenario, client=FixedClient(recipe), follow=False)


def top_command(app: ReefApp) -> str | None:
    results = app.screen.query_one(CommandList)
    return str(results.get_option_at_index(0).prompt).split("\n")[0] if results.option_count else None


@pytest.mark.parametrize(("typed", "found", "mode"), [("Versions", "Versions", "versions"),
                                                      ("Requests", "Requests", "requests")])  # fmt: skip
async def test_the_palette_on_the_training_screen_finds_the_other_screens(typed: str, found: str, mode: str) -> None:
    app = fixed_app("sao")
    async with app.run_test(size=(120, 30)) as pilot:
        await eventually(lambda: app.connected, 60, "the status", pause=pilot.pause)
        await pilot.press("t")
        await eventually(lambda: isinstance(app.screen, TrainingScreen), 60, "training", pause=pilot.pause)
        await pilot.press("ctrl+p")
        await eventually(lambda: isinstance(app.screen, CommandPalette), 60, "the palette", pause=pilot.pause)
        await pilot.press(*typed)
        await eventually(lambda: top_command(app) == found, 60, f"{found} found", pause=pilot.pause)
        await pilot.press("enter")
        await eventually(lambda: app.current_mode == mode, 60, f"the {mode} screen", pause=pilot.pause)


async def test_the_palette_runs_the_scenario_key() -> None:
    app = fixed_app("sao", scenario=None)
    async with app.run_test(size=(120, 30)) as pilot:
        await eventually(lambda: app.connected, 60, "the status", pause=pilot.pause)
        await pilot.press("t", "ctrl+p")
        await eventually(lambda: isinstance(app.screen, CommandPalette), 60, "the palette", pause=pilot.pause)
        await pilot.press(*"Scenario")
        await eventually(lambda: top_command(app) == "Scenario", 60, "Scenario found", pause=pilot.pause)
        await pilot.press("enter")
        await eventually(lambda: app.scenario == "ci", 60, "the next scenario chosen", pause=pilot.pause)


@pytest.mark.parametrize("key", ["r", "e", "v", "t"])
async def test_the_footer_keeps_quit_and_scenario_at_80_columns(key: str) -> None:
    app = fixed_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await eventually(lambda: app.connected, 60, "the status", pause=pilot.pause)
        await pilot.press(key)

        def shown() -> set[str]:
            keys = app.screen.query(FooterKey)
            return {k.key for k in keys if k.region.width and k.region.right <= app.size.width}

        await eventually(lambda: {"q", "s"} <= shown(), 60, "q and s in the footer", pause=pilot.pause)


@pytest.mark.parametrize(("size", "in_footer"), [((80, 24), False), ((160, 48), True)], ids=["80", "160"])
async def test_the_canary_keys_are_in_the_footer_where_they_fit(size: tuple[int, int], in_footer: bool) -> None:
    app = fixed_app()
    async with app.run_test(size=size) as pilot:
        await eventually(lambda: app.connected, 60, "the status", pause=pilot.pause)
        await pilot.press("v")
        screen = await eventually(lambda: isinstance(app.screen, VersionsScreen) and app.screen, 60, "versions")

        def shown() -> set[str]:
            keys = screen.query(FooterKey)
            return {k.key for k in keys if k.region.width and k.region.right <= app.size.width}

        await eventually(lambda: {"q", "s", "i"} <= shown(), 60, "the footer", pause=pilot.pause)
        assert ({"c", "x"} <= shown()) is in_footer
        offered = {command.title: command.help for command in app.get_system_commands(screen)}
        assert (offered["Canary"], offered["End canary"]) == ("key c", "key x")
        assert "| `c` | Canary |" in help_text(app) and "| `x` | End canary |" in help_text(app)


async def test_requests_of_a_recipe_that_takes_none_say_so_and_offer_no_n() -> None:
    app = fixed_app("sao")
    async with app.run_test(size=(80, 24)) as pilot:
        await eventually(lambda: app.connected, 60, "the status", pause=pilot.pause)
        await pilot.press("e")
        screen: Any = await eventually(
            lambda: isinstance(app.screen, RequestsScreen) and app.screen, 60, "requests", pause=pilot.pause
        )
        title = screen.query_one("#requests-title")
        await eventually(lambda: "sao recipe takes none" in str(title.content), 60, "the refusal", pause=pilot.pause)
        assert "New request" not in [command.title for command in app.get_system_commands(screen)]
        await pilot.press("n")
        assert not isinstance(app.screen, NewRequestScreen)
        assert "n" not in {key.key for key in screen.query(FooterKey)}


@pytest.mark.parametrize("key", ["r", "e", "v", "t"])
async def test_the_palette_lists_each_command_once_under_the_key_that_runs_it(key: str) -> None:
    app = fixed_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await eventually(lambda: app.connected, 60, "the status", pause=pilot.pause)
        await pilot.press(key)
        commands = list(app.get_system_commands(app.screen))
        titles = [command.title for command in commands]
        assert len(titles) == len(set(titles)), sorted(titles)
        helps = {command.title: command.help for command in commands}
        assert helps["Quit"] == "key q" and helps["Theme"] == "key ctrl+t"  # as the help screen says


@pytest.mark.parametrize(("recipe", "offered", "not_offered"), [
    ("reefine", {"d", "p", "b", "i"}, set()),
    ("sao", {"p", "b"}, {"d", "i", "c", "x"}),
    ("record", set(), {"d", "p", "b", "i", "c", "x"}),
])  # fmt: skip
async def test_the_versions_footer_offers_what_the_recipes_versions_take(
    recipe: str, offered: set[str], not_offered: set[str]
) -> None:
    app = fixed_app(recipe)
    async with app.run_test(size=(160, 48)) as pilot:
        await eventually(lambda: app.connected, 60, "the status", pause=pilot.pause)
        await pilot.press("v")
        await eventually(lambda: isinstance(app.screen, VersionsScreen), 60, "versions", pause=pilot.pause)

        def footer() -> set[str]:
            return {key.key for key in app.screen.query(FooterKey)}

        await eventually(lambda: offered <= footer() and not footer() & not_offered, 60, f"the {recipe} keys",
                         pause=pilot.pause)  # fmt: skip


def test_a_steps_metrics_read_as_words_not_json() -> None:
    from reef_tui.screens.versions import metric_lines

    metrics = {"target_release_id": "3f2a9c0d4e5b6a79", "mean_reward": 0.4213, "canary": {"share": 20.0, "ended": True}}
    assert metric_lines(metrics, {"3f2a9c0d4e5b6a79": "v1"}) == [
        "target: v1 (release 3f2a9c0d)",
        "mean reward: 0.4213",
        "canary: share 20, ended yes",
    ]
