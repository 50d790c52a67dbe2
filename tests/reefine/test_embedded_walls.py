"""With the embedded model a harness request settles within the time `reef request --wait` follows it there: the
proposer run and the gate's evaluation each end within EMBEDDED_WALL_S, unless the person set their bounds."""

from __future__ import annotations

from pathlib import Path

from recipes.reefine.recipe import EMBEDDED_WALL_S, ReefineRecipe
from reef_client import SMALL_MODEL_WAIT_S
from reef_daemon.settings import load_settings


def recipe(tmp_path: Path, **overrides: str) -> ReefineRecipe:
    settings = load_settings(
        overrides={"recipe": "reefine", "reef.state-dir": str(tmp_path), "harness.trial": "off", **overrides},
        environ={},
    )
    return ReefineRecipe(settings)


def test_on_the_embedded_model_a_request_fits_the_time_its_wait_follows_it(tmp_path: Path) -> None:
    embedded = recipe(tmp_path)
    assert embedded.agent.bounds.wall_s == EMBEDDED_WALL_S
    assert 2 * EMBEDDED_WALL_S < SMALL_MODEL_WAIT_S  # the proposer's run and the gate's evaluation, one after the other
    chosen = ReefineRecipe.chosen_settings(embedded.settings)
    assert chosen["harness.proposer-wall-s"] == (f"{EMBEDDED_WALL_S:g}", "recipe reefine, for the embedded model")
    assert chosen["harness.eval-wall-s"][0] == f"{EMBEDDED_WALL_S:g}"


def test_a_wall_the_person_set_or_an_upstream_model_keeps_its_bound(tmp_path: Path) -> None:
    assert recipe(tmp_path, **{"harness.proposer-wall-s": "700"}).agent.bounds.wall_s == 700
    upstream = recipe(tmp_path, **{"inference.upstream-url": "http://127.0.0.1:9"})
    assert upstream.agent.bounds.wall_s == 900
    assert "harness.eval-wall-s" not in ReefineRecipe.chosen_settings(upstream.settings)
