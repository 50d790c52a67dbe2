"""The `record` recipe: keep every exchange and report, train nothing. The default.

`recipes.record:RecordRecipe` resolves lazily, so that finding the built-in recipes' settings loads no recipe.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RecordRecipe"]


def __getattr__(name: str) -> Any:
    if name == "RecordRecipe":
        from recipes.record import recipe

        return recipe.RecordRecipe
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
