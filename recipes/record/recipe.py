"""The `record` recipe's class."""

from __future__ import annotations

from typing import ClassVar

from reef_daemon.recipe_api import Recipe


class RecordRecipe(Recipe):
    name: ClassVar[str] = "record"
