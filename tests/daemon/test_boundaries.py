"""Package boundaries: the adapters and the harness tree stand apart from the daemon, a recipe can be written
from the recipe interface alone, and the records layer sits below the proxy and the store."""

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


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("reef_daemon/records", ("reef_daemon.proxy", "reef_daemon.store")),
        ("reef_daemon/store", ("reef_daemon.proxy",)),
    ],
)
def test_records_stand_below_the_proxy_and_the_store(package: str, forbidden: tuple[str, ...]) -> None:
    """Answers, previews and summaries are derived in the records layer, which both the proxy and the store import:
    it imports neither, and the store does not import the proxy."""
    paths = sorted((ROOT / package).rglob("*.py"))
    assert paths
    for path in paths:
        crossing = {name for name in reef_imports(path) if name.split(".")[:2] in [p.split(".") for p in forbidden]}
        assert not crossing, f"{path.relative_to(ROOT)} imports {sorted(crossing)}"
