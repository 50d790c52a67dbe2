"""The recipes that come with reef, by name, and the settings sections they declare (`SETTINGS_SECTIONS` in the
module a reference names), found by importing those modules by name. Imports nothing of the daemon, so the settings
can know every built-in recipe's keys (for `--help`, config files and completion) without the recipe host."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from typing import Any

# Built-in names. Anything else must be a dotted reference `package.module:Class`.
BUILTIN_RECIPES: dict[str, str] = {
    "record": "recipes.record:RecordRecipe",
    "reefine": "recipes.reefine:ReefineRecipe",
    "sao": "recipes.sao:SaoRecipe",
    "grpo": "recipes.sao:GrpoRecipe",
}
# Old names still accepted (never offered); `reef serve` says which name replaced them.
RENAMED_RECIPES: dict[str, str] = {"harness-evolve": "reefine"}


class BadSections(Exception):
    """A recipe module's SETTINGS_SECTIONS is not a mapping of section names to dataclasses."""


def declared_sections(module: Any) -> dict[str, type[Any]]:
    """The settings sections a recipe's module declares, by section name."""
    sections = getattr(module, "SETTINGS_SECTIONS", {})
    if not (isinstance(sections, Mapping) and all(isinstance(cls, type) for cls in sections.values())):
        raise BadSections("SETTINGS_SECTIONS must map section names to dataclasses")
    return dict(sections)


@functools.cache
def builtin_sections() -> dict[str, type[Any]]:
    """Every built-in recipe's settings sections."""
    found: dict[str, type[Any]] = {}
    for target in BUILTIN_RECIPES.values():
        found.update(declared_sections(importlib.import_module(target.partition(":")[0])))
    return found
