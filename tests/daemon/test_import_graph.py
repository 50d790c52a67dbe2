"""The daemon's import graph has no circle: a part imports only parts below it, so each can be read, tested and
changed from the bottom up. Imports made only for type checking are left out; imports inside functions count (they
are how a circle hides). And the daemon reads its settings as typed attributes, never by a string key."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "reef_daemon"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported(path: Path, known: set[str]) -> set[str]:
    """The daemon's modules `path` imports at run time: a `from package import module` names the module."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and _type_checking_only(node)
               for inner in node.body for n in ast.walk(inner)}  # fmt: skip
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                as_module = f"{node.module}.{alias.name}"
                found.add(as_module if as_module in known else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name in known}


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in (ROOT / PACKAGE).rglob("*.py")}
    known = set(paths)
    return {name: imported(path, known) - {name} for name, path in paths.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected parts of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            part = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                part.append(member)
                if member == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_daemon_has_no_import_circle() -> None:
    assert circles(import_graph()) == []


def test_the_circle_scan_finds_a_circle_through_a_function_and_not_through_type_checking(tmp_path: Path) -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert circles(graph) == [["a", "b", "c"]]
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import x.y\ndef f():\n    import x.z\n"
    probe = tmp_path / "probe.py"
    probe.write_text(source, encoding="utf-8")
    assert imported(probe, {"x.y", "x.z"}) == {"x.z"}


SETTING_BY_KEY = re.compile(r"settings\.value\(")


def test_the_daemon_reads_no_setting_by_a_string_key() -> None:
    readers = [
        str(path.relative_to(ROOT))
        for path in (ROOT / PACKAGE).rglob("*.py")
        if path.name != "settings.py" and SETTING_BY_KEY.search(path.read_text(encoding="utf-8"))
    ]
    assert readers == []


def test_the_daemon_calls_recipes_through_the_interface_not_the_toolkit() -> None:
    """`recipe_api` is what recipes import (the interface and the toolkit); the daemon's own parts import only the
    interface, so a part that needs `Recipe` does not load the whole toolkit."""
    graph = import_graph()
    importers = sorted(name for name, targets in graph.items() if "reef_daemon.recipe_api" in targets)
    assert importers == []
