"""Weight recipes: SAO (single-rollout, critic baseline) and its GRPO control, on the embedded model.

`recipes.sao:SaoRecipe` and `recipes.sao:GrpoRecipe` resolve lazily, so that importing the package's pure parts
(the toy task, the objective) does not load torch.
"""

from __future__ import annotations

from typing import Any

__all__ = ["GrpoRecipe", "SaoRecipe"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from recipes.sao import recipe

        return getattr(recipe, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
