"""Finding the deployment's recipe: by a built-in name or a dotted reference `package.module:Class`.

Requests never choose one: every scenario is bound to the deployment's recipe when it is created. What a recipe
implements is `recipe_interface.py` (a recipe imports it through `recipe_api.py`); the recipe worker
(`recipe_worker.py`) drives it.
"""

from __future__ import annotations

import functools
import importlib
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from reef_contract import RecordType, did_you_mean, record_type
from reef_daemon.builtin_recipes import BUILTIN_RECIPES, RENAMED_RECIPES, BadSections, declared_sections
from reef_daemon.recipe_interface import Recipe
from reef_daemon.setting_kinds import SettingsError
from reef_daemon.settings import Settings, load_settings, read_config_table

_DOTTED = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def load_serving_settings(
    *, config_file: Path | None, overrides: Mapping[str, Any], environ: Mapping[str, str]
) -> Settings:
    """Settings for `reef serve`: as the user gave them, over the profile of the recipe they name, with that
    recipe's settings sections."""
    reference = _named_recipe(config_file, overrides)
    sections = recipe_sections(reference)
    plain = load_settings(config_file=config_file, overrides=overrides, environ=environ, recipe_sections=sections)
    if plain.recipe in RENAMED_RECIPES:
        print(f"reef: recipe '{plain.recipe}' is the old name of '{RENAMED_RECIPES[plain.recipe]}'", file=sys.stderr)
    profile = resolve_recipe(plain.recipe).profile
    if not profile:
        return plain
    return load_settings(
        config_file=config_file, overrides=overrides, environ=environ, profile=profile, recipe_sections=sections
    )


def _named_recipe(config_file: Path | None, overrides: Mapping[str, Any]) -> str:
    """The recipe the command line or the config file names, before any other setting is read."""
    if "recipe" in overrides:
        return str(overrides["recipe"])
    named = read_config_table(config_file).get("recipe") if config_file is not None else None
    return named if isinstance(named, str) else "record"


def recipe_sections(reference: str) -> dict[str, type[Any]]:
    """The settings sections the recipe's module declares (`SETTINGS_SECTIONS`), by section name; SettingsError
    for an unknown recipe."""
    try:
        return declared_sections(_recipe_module(reference)[0])
    except BadSections as error:
        raise SettingsError(f"recipe '{reference}': {error}") from None


def resolve_recipe(reference: str) -> type[Recipe]:
    """The recipe class named by a built-in name (any case) or `package.module:Class`; SettingsError otherwise,
    suggesting the closest built-in name."""
    module, target, class_name = _recipe_module(reference)
    found = getattr(module, class_name, None)
    if not (isinstance(found, type) and issubclass(found, Recipe)):
        raise SettingsError(f"'{target}' is not a recipe class (a subclass of reef_daemon.recipe_api.Recipe)")
    return found


def consumed_types(recipe: Recipe | type[Recipe]) -> tuple[RecordType, ...]:
    """The record types a recipe consumes; one named by its old name (`train`) counts as the type it is now."""
    return tuple(known for name in recipe.consumes if (known := record_type(name)) is not None)


@functools.cache
def units_of(recipe: str) -> tuple[RecordType, ...] | None:
    """The record types the recipe a scenario is bound to (by its name) trains on; () for one that never trains,
    None for one this reef cannot load (a recipe of another daemon's, outside reef)."""
    try:
        return consumed_types(resolve_recipe(recipe))
    except SettingsError:
        return None


def _recipe_module(reference: str) -> tuple[ModuleType, str, str]:
    """The module a recipe reference names, the reference as `package.module:Class`, and the class's name."""
    name = reference.strip().lower()
    target = BUILTIN_RECIPES.get(RENAMED_RECIPES.get(name, name), reference)
    if not _DOTTED.fullmatch(target):
        hint = did_you_mean(reference.strip().lower(), BUILTIN_RECIPES)
        raise SettingsError(
            f"unknown recipe '{reference}'{hint}; accepted: {', '.join(BUILTIN_RECIPES)}, or package.module:Class"
        )
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SettingsError(f"cannot import recipe module '{module_name}': {exc}") from None
    return module, target, class_name
