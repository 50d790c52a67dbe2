"""The recipe host: resolves the deployment's recipe by name or dotted reference and gives it its scenarios.

A recipe decides what reef does with scored records (nothing, train weights, or evolve a harness). Requests
never choose one: every scenario is bound to the deployment's recipe when it is created.
"""

from __future__ import annotations

import importlib
import re
from typing import Any, ClassVar

from reef_daemon.settings import Settings, SettingsError
from reef_daemon.store import Store

# Built-in names. Anything else must be a dotted reference `package.module:Class`.
BUILTIN_RECIPES: dict[str, str] = {
    "record": "recipes.record:RecordRecipe",
}
_DOTTED = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


class Recipe:
    """Base of every recipe. The default records traffic and never trains."""

    name: ClassVar[str] = "recipe"
    default_training_mode: ClassVar[str] = "auto"
    trains: ClassVar[bool] = False

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    async def start(self, store: Store) -> None:
        """Called once the store is open; a training recipe starts its workers here."""

    async def close(self) -> None:
        """Called on shutdown, after the HTTP server stopped taking requests."""

    def on_report(self, scenario: str, report: dict[str, Any]) -> None:
        """A report was committed for `scenario`; a training recipe wakes its worker."""

    def status(self) -> dict[str, Any]:
        return {"name": self.name, "trains": self.trains}


def resolve_recipe(reference: str) -> type[Recipe]:
    """The recipe class named by a built-in name or `package.module:Class`; SettingsError otherwise."""
    target = BUILTIN_RECIPES.get(reference, reference)
    if not _DOTTED.fullmatch(target):
        raise SettingsError(
            f"unknown recipe '{reference}'; accepted: {', '.join(BUILTIN_RECIPES)}, or package.module:Class"
        )
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SettingsError(f"cannot import recipe module '{module_name}': {exc}") from None
    found = getattr(module, class_name, None)
    if not (isinstance(found, type) and issubclass(found, Recipe)):
        raise SettingsError(f"'{target}' is not a recipe class (a subclass of reef_daemon.Recipe)")
    return found
