"""Package boundaries: the adapters and the harness tree stand apart from the daemon, and a recipe, built-in or
not, is written from the recipe interface alone."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def reef_imports(path: Path) -> set[str]:
    """The modules of reef's own packages that a source file imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.split(".")[0] in ("reef_daemon", "reef_cli", "reef_tui", "recipes")}


@pytest.mark.parametrize("package", ["adapters", "reef_harness"])
def test_adapters_and_the_tree_import_only_the_contract_from_the_daemon(package: str) -> None:
    for path in sorted((ROOT / package).rglob("*.py")):
        daemon_parts = {name for name in reef_imports(path) if name.startswith("reef_daemon")}
        assert daemon_parts <= {"reef_daemon.contract"}, f"{path.relative_to(ROOT)} imports {sorted(daemon_parts)}"


def test_the_test_recipe_needs_only_the_recipe_interface() -> None:
    assert reef_imports(ROOT / "tests" / "support" / "counting_recipe.py") == {"reef_daemon.recipe_api"}


RECIPE_FACES = {"reef_daemon.recipe_api", "reef_daemon.contract"}


def test_the_built_in_recipes_import_only_the_recipe_interface_and_the_contract_from_the_daemon() -> None:
    paths = sorted((ROOT / "recipes").rglob("*.py"))
    assert paths, "no recipes found"
    for path in paths:
        daemon_parts = {
            name for name in reef_imports(path) if name.split(".")[0] in ("reef_daemon", "reef_cli", "reef_tui")
        }
        assert daemon_parts <= RECIPE_FACES, f"{path.relative_to(ROOT)} imports {sorted(daemon_parts - RECIPE_FACES)}"


def test_the_boundary_scan_sees_imports_inside_functions_too(tmp_path: Path) -> None:
    source = tmp_path / "late.py"
    source.write_text("def f():\n    from reef_daemon.store import Store\n    import reef_daemon.settings\n")
    assert reef_imports(source) == {"reef_daemon.store", "reef_daemon.settings"}
