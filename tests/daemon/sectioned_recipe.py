"""Recipes outside reef that declare settings sections of their own, for the settings tests.

Written from `reef_daemon.recipe_api` alone, as a recipe outside reef would be.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from reef_daemon.recipe_api import POSITIVE_INT, Recipe, Settings, setting


@dataclass(frozen=True)
class SparkleSection:
    depth: int = setting(3, POSITIVE_INT, env="SPARKLE_DEPTH", help="how deep the sparkle goes")


@dataclass(frozen=True)
class ClashingSection:
    port: int = setting(1, POSITIVE_INT, help="a section under a name reef's settings already use")


SETTINGS_SECTIONS: dict[str, type[Any]] = {"sparkle": SparkleSection}


class SparkleRecipe(Recipe):
    name: ClassVar[str] = "sparkle"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.depth = settings.of(SparkleSection).depth
