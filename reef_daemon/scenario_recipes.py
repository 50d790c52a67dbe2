"""Scenarios made under another recipe than the one the daemon runs: they keep their recipe (their records and
releases were made for it) and do not train until moved. One wording for the daemon's start-up lines, `reef start`
and `reef status`."""

from __future__ import annotations

from collections.abc import Mapping


def other_recipe_scenarios(deployment: str, recipes: Mapping[str, str]) -> dict[str, str]:
    """Scenario -> its recipe, for the scenarios whose recipe is not `deployment`."""
    return {name: recipe for name, recipe in sorted(recipes.items()) if recipe != deployment}


def other_recipe_notice(deployment: str, recipes: Mapping[str, str]) -> list[str]:
    """Lines telling which scenarios keep another recipe and how to move one; none when every scenario is on
    `deployment`."""
    others = other_recipe_scenarios(deployment, recipes)
    if not others:
        return []
    kept = ", ".join(f"{name} ({recipe})" for name, recipe in others.items())
    first = next(iter(others))
    return [
        f"scenarios made under another recipe keep it and are not trained by {deployment}: {kept}",
        f"move one to {deployment} with: reef scenarios move {first}",
    ]
