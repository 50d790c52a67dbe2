"""The `reefine` recipe (old name `harness-evolve`): change requests and low scores become harness releases.

`recipes.reefine:ReefineRecipe` resolves lazily, so that finding the built-in recipes' settings does not load the
proposers (its settings are the daemon's `harness` section).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ReefineRecipe"]


def __getattr__(name: str) -> Any:
    if name == "ReefineRecipe":
        from recipes.reefine import recipe

        return recipe.ReefineRecipe
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
