"""The `reefine` recipe (old name `harness-evolve`): change requests and low scores become harness releases.

`recipes.reefine:ReefineRecipe` resolves lazily, so that reading the recipe's settings (`settings.py`) does not load
the proposers.
"""

from __future__ import annotations

from typing import Any

from recipes.reefine.settings import SETTINGS_SECTIONS

__all__ = ["SETTINGS_SECTIONS", "ReefineRecipe"]


def __getattr__(name: str) -> Any:
    if name == "ReefineRecipe":
        from recipes.reefine import recipe

        return recipe.ReefineRecipe
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
