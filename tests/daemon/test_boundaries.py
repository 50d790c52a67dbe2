"""Package boundaries: the adapters and the harness tree stand apart from the daemon, and a recipe can be written
from the recipe interface alone."""

from __future__ import annotations

import ast
import re
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


# Wire names: a header of reef's, a route, or a REEF_* environment variable, spelled as a string.
WIRE_NAME = re.compile(r"(?i:x-reef-)|(?<![\w/])/reef/|/v1/|/healthz|\bREEF_[A-Z0-9_]")
# Strings that look like wire names and are not the contract's: a heredoc delimiter in the install script, and
# the proposer's jail tools, which run as a plain file with the standard library only and cannot import reef.
NOT_WIRE_NAMES = {
    ("reef_daemon/harness/install/script.py", "REEF_EOF_"),
    ("recipes/reefine/agent_tools.py", "REEF_STEP_URL"),
    ("recipes/reefine/agent_tools.py", "REEF_STEP_TOKEN"),
}


def wire_names_spelled(path: Path) -> list[str]:
    """The string literals of a source file (docstrings aside) that spell a wire name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and WIRE_NAME.search(node.value)
    ]


@pytest.mark.parametrize("package", ["reef_daemon", "recipes"])
def test_wire_names_are_spelled_only_in_the_contract(package: str) -> None:
    contract = ROOT / "reef_daemon" / "contract"
    spelled = []
    for path in sorted((ROOT / package).rglob("*.py")):
        if path == contract.with_suffix(".py") or contract in path.parents:
            continue
        where = path.relative_to(ROOT).as_posix()
        spelled += [f"{where}: {text!r}" for text in wire_names_spelled(path) if (where, text) not in NOT_WIRE_NAMES]
    assert spelled == [], "use the constants of reef_daemon.contract instead"


def test_the_scan_finds_a_wire_name(tmp_path: Path) -> None:
    source = tmp_path / "route.py"
    source.write_text('"""Serves /reef/status."""\nROUTE = "/reef/status"\nHEADER = "X-Reef-Scenario"\n')
    assert wire_names_spelled(source) == ["/reef/status", "X-Reef-Scenario"]
