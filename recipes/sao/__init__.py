"""Weight recipes: SAO (single-rollout, critic baseline) and its GRPO control, on the embedded model."""

from recipes.sao.recipe import GrpoRecipe, SaoRecipe

__all__ = ["GrpoRecipe", "SaoRecipe"]
