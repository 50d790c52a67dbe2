"""How routes reach the harness of the deployment: only a harness recipe has one."""

from __future__ import annotations

from reef_daemon.context import Daemon
from reef_daemon.errors import Unsupported
from reef_daemon.recipe_interface import HarnessRecipe


def harness_recipe(daemon: Daemon) -> HarnessRecipe:
    """The deployment's recipe, which evolves a harness; 501 when it does not."""
    recipe = daemon.recipe
    if not isinstance(recipe, HarnessRecipe):
        raise Unsupported(
            f"the {recipe.name} recipe does not evolve a harness; serve with --recipe reefine",
            type="no_harness",
        )
    return recipe
