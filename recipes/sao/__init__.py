"""Weight recipes: SAO (single-rollout, critic baseline) and its GRPO control, on the embedded model.

`recipes.sao:SaoRecipe` and `recipes.sao:GrpoRecipe` resolve lazily, so that importing the package's pure parts
(the toy task, the objective, the settings) does not load torch.
"""

from __future__ import annotations

from typing import Any

from recipes.sao.settings import SETTINGS_SECTIONS

__all__ = ["SETTINGS_SECTIONS", "GrpoRecipe", "SaoRecipe"]


def __getattr__(name: str) -> Any:
    if name in ("GrpoRecipe", "SaoRecipe"):
        from recipes.sao import recipe

        return getattr(recipe, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
