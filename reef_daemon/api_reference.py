"""The API reference, written from the contract: `python -m reef_daemon.api_reference > docs/api.md`.

Routes (with the methods the daemon's route tables serve them with, and each handler's docstring), headers,
environment variables, and the JSON shapes (the contract's TypedDicts, their docstrings and fields). A test
regenerates the file and compares, so the reference cannot drift from the code. Not imported by the contract's
package: only this generator reads the daemon's route tables.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import sys
import typing
from collections.abc import Iterator
from types import ModuleType
from typing import NamedTuple

import reef_contract as contract
from reef_contract import _env, _headers, _routes

TITLE = "# reef's HTTP API"
INTRO = """\
Generated from `reef_contract` by `python -m reef_daemon.api_reference > docs/api.md`; do not edit.

The daemon listens on {url} unless told otherwise. The inference routes keep their `/v1` prefix, which SDKs add
themselves (an OpenAI or Anthropic SDK's base URL is `{url}/v1`, or `{url}` for Anthropic's); reef's own routes
under `/reef` have none, so a client of reef's API (`reef --url`, `REEF_URL`) is given `{url}`. When the daemon
has a token, every route but `/healthz` wants `Authorization: Bearer TOKEN`. Errors answer
`{{"error": {{"type": ..., "message": ...}}}}` with the HTTP status of the failure."""


class Constant(NamedTuple):
    """A module-level constant of the contract: its name, its value, the comment that explains it (`own` when it
    is written beside this constant, not shared from the one above), and the comment of the block of lines it stands
    in (the first constant's after a blank line)."""

    name: str
    value: object
    comment: str
    own: bool
    block: str


def constants(module: ModuleType) -> Iterator[Constant]:
    """The module's `NAME: Final = ...` constants in source order, each with the `#` lines just above it (or the
    comment on its line); one right below another without a comment of its own shares the other's."""
    source = inspect.getsource(module)
    lines = source.splitlines()
    previous = block = ""
    for node in ast.parse(source).body:
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        name = node.target.id
        if name.startswith("_"):
            continue
        above: list[str] = []
        row = node.lineno - 2
        while row >= 0 and lines[row].lstrip().startswith("#"):
            above.insert(0, lines[row].lstrip("# ").strip())
            row -= 1
        line = lines[node.lineno - 1]
        trailing = line.split("  # ", 1)[1].strip() if "  # " in line else ""
        trailing = "" if trailing.startswith("noqa") else trailing
        comment = " ".join(above) or trailing
        own = bool(comment)
        in_block = row >= 0 and bool(lines[row].strip())
        if not comment and in_block:
            comment = previous
        if not in_block:
            block = comment
        previous = comment
        yield Constant(name, getattr(module, name), comment, own, block)


def served_routes() -> dict[str, list[tuple[str, str]]]:
    """Each path the daemon serves: its methods, each with the first paragraph of its handler's docstring."""
    from aiohttp import web

    import reef_daemon.routes as route_modules

    served: dict[str, list[tuple[str, str]]] = {route: [("POST", "")] for route in _routes.INFERENCE_ROUTES}
    for info in sorted(pkgutil.iter_modules(route_modules.__path__), key=lambda info: info.name):
        table = getattr(importlib.import_module(f"{route_modules.__name__}.{info.name}"), "routes", None)
        if not isinstance(table, web.RouteTableDef):
            continue
        for definition in table:
            if isinstance(definition, web.RouteDef):
                doc = inspect.getdoc(definition.handler) or ""
                served.setdefault(definition.path, []).append((definition.method, doc.split("\n\n")[0]))
    return served


def _routes_section() -> list[str]:
    """The routes in the contract's order, a table per block of the contract, named by the block's comment. A route's
    notes are its handler's docstring, or else the comment a route inside a block has of its own."""
    served = served_routes()
    out = ["## Routes"]
    header = ["| method | path | notes |", "| --- | --- | --- |"]
    group: str | None = None
    for constant in constants(_routes):
        if not (isinstance(constant.value, str) and constant.name.endswith("_ROUTE")):
            continue
        if constant.block != group:
            group = constant.block
            out += ["", group, "", *header] if group else ["", *header]
        own = constant.comment if constant.own and constant.comment != group else ""
        for method, doc in sorted(served.get(constant.value, [])):
            out.append(f"| {method} | `{constant.value}` | {_cell(' '.join((doc or own).split()))} |")
    return [*out, ""]


def _named_section(title: str, module: ModuleType, intro: str) -> list[str]:
    out = [f"## {title}", "", intro, "", "| name | meaning |", "| --- | --- |"]
    for constant in constants(module):
        if isinstance(constant.value, str):
            out.append(f"| `{constant.value}` | {_cell(constant.comment) or '—'} |")
    return [*out, ""]


def _is_typeddict(value: object) -> bool:
    return isinstance(value, type) and typing.is_typeddict(value)


def _shape(cls: type) -> list[str]:
    """A TypedDict as a heading, its docstring, and its fields with their types as the contract spells them."""
    out = [f"### {cls.__name__}", ""]
    doc = inspect.cleandoc(cls.__doc__) if "__doc__" in vars(cls) and cls.__doc__ else ""  # not dict's own
    if doc:
        out += [" ".join(paragraph.split()) + "\n" for paragraph in doc.split("\n\n")]
    node = ast.parse(inspect.getsource(cls)).body[0]
    assert isinstance(node, ast.ClassDef)
    source = inspect.getsource(cls)
    partial = any(keyword.arg == "total" for keyword in node.keywords)
    if partial:
        out += ["Every field may be left out.", ""]
    out.append("```")
    for field in node.body:
        if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name):
            out.append(f"{field.target.id}: {ast.get_source_segment(source, field.annotation)}")
    return [*out, "```", ""]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def reference() -> str:
    """The whole reference, as Markdown."""
    shapes = [getattr(contract, name) for name in sorted(contract.__all__)]
    lines = [TITLE, "", INTRO.format(url=_routes.DEFAULT_URL), ""]
    lines += _routes_section()
    lines += _named_section("Headers", _headers, "reef's own headers all start with `x-reef-`.")
    lines += _named_section("Environment variables", _env, "What reef and its clients read from the environment.")
    lines += ["## JSON shapes", "", "What the routes answer with, as the contract's TypedDicts.", ""]
    for shape in shapes:
        if _is_typeddict(shape):
            lines += _shape(shape)
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference())
