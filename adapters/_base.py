"""What every adapter is: a name, the kinds it renders and where, and a pure renderer from tree to files."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from adapters._agent import AgentSide
from reef_contract import AdapterInfo
from reef_harness import Entry

SKILL_DESCRIPTION_LIMIT = 200


class RenderRefused(ValueError):
    """The tree cannot become this adapter's files. The message says which entry and why, for a person to act on."""


@dataclass(frozen=True)
class Adapter:
    """One coding agent: `render` turns a tree into `{relative path: text}`, binding-free; `agent` says how it is
    installed and started on the person's machine."""

    name: str
    title: str
    binary: str
    renders: Mapping[str, str]  # kind -> where it goes (a path pattern), for the kinds this adapter renders
    render: Callable[[list[Entry]], dict[str, str]]
    agent: AgentSide
    notes: tuple[str, ...] = ()

    def describe(self) -> AdapterInfo:
        """What `GET /reef/harness/adapters` shows of this adapter."""
        return {
            "name": self.name,
            "title": self.title,
            "binary": self.binary,
            "renders": dict(self.renders),
            "notes": list(self.notes),
        }


def with_frontmatter(text: str, fields: Mapping[str, str | bool]) -> str:
    """The text with YAML frontmatter first; text that already starts with frontmatter is kept as written."""
    if text.startswith("---\n"):
        return text if text.endswith("\n") else text + "\n"
    lines = ["---"]
    for key, value in fields.items():
        shown = ("true" if value else "false") if isinstance(value, bool) else json.dumps(value, ensure_ascii=False)
        lines.append(f"{key}: {shown}")
    lines += ["---", "", text.rstrip("\n"), ""]
    return "\n".join(lines)


def first_line(text: str) -> str:
    """A one-line description from the first non-empty line of a text (headings lose their `#`)."""
    for line in text.splitlines():
        stripped = line.strip().lstrip("#").strip()
        if stripped:
            return stripped[:SKILL_DESCRIPTION_LIMIT]
    return ""


def rules_file(entries: list[Entry]) -> str | None:
    """Every rules entry's text, in tree order, as one markdown file; None when there are none."""
    texts = [str(entry.config["text"]).strip() for entry in entries if entry.kind == "rules"]
    return "\n\n".join(texts) + "\n" if texts else None


def merged_config(entries: list[Entry]) -> dict[str, Any]:
    """The `data` of every config entry deep-merged in tree order (later entries win)."""
    merged: dict[str, Any] = {}
    for entry in entries:
        if entry.kind == "config":
            deep_merge(merged, entry.config["data"])
    return merged


def deep_merge(target: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(target.get(key), dict):
            deep_merge(target[key], value)
        else:
            target[key] = json.loads(json.dumps(value))  # a copy, so trees never share state
    return target


def refuse_keys(data: Mapping[str, Any], refused: Mapping[str, str], where: str) -> None:
    """RenderRefused when `data` sets a key the adapter keeps to itself; `refused` maps key -> why."""
    for key in data:
        if key in refused:
            raise RenderRefused(f"a config entry may not set '{key}' in {where}: {refused[key]}")


def refuse_unrenderable(adapter_name: str, entries: list[Entry], renders: Mapping[str, str]) -> None:
    for entry in entries:
        if entry.kind not in renders:
            raise RenderRefused(
                f"entry '{entry.id}' is of kind {entry.kind}, which {adapter_name} cannot load; "
                f"use one of: {', '.join(renders)}"
            )


def start_files(
    adapter_name: str, entries: list[Entry], renders: Mapping[str, str], extensions_refused: str | None = None
) -> dict[str, str]:
    """A render's first files: RenderRefused for any extension when `extensions_refused` says why the agent takes
    none, and for a kind the adapter cannot load; then the rules file, if any, where `renders["rules"]` puts it."""
    if extensions_refused is not None:
        for entry in entries:
            if entry.kind == "extension":
                raise RenderRefused(f"entry '{entry.id}' is an extension: {extensions_refused}")
    refuse_unrenderable(adapter_name, entries, renders)
    rules = rules_file(entries)
    return {} if rules is None else {renders["rules"]: rules}


def prompt_files(entries: list[Entry], skill_path: str, command_path: str) -> dict[str, str]:
    """Each skill as a file at `skill_path` (frontmatter: name, description) and each command at `command_path`
    (frontmatter: description); both paths are patterns with `{name}` for the entry's name."""
    files: dict[str, str] = {}
    for entry in entries:
        text = str(entry.config.get("text", ""))
        if entry.kind == "skill":
            fields = {"name": entry.name, "description": first_line(text)}
            files[skill_path.format(name=entry.name)] = with_frontmatter(text, fields)
        elif entry.kind == "command":
            files[command_path.format(name=entry.name)] = with_frontmatter(text, {"description": first_line(text)})
    return files


def json_file(value: Any) -> str:
    """A JSON config file's text as every adapter writes it: indented, keys sorted, a final newline."""
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def tree_config(
    entries: list[Entry], refused: Mapping[str, str], where: str, defaults: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The tree's merged config for the file `where`, deep-merged over a copy of the adapter's `defaults` (their
    values keep their types, such as a loader expression); RenderRefused when the tree sets a key in `refused`."""
    config = merged_config(entries)
    refuse_keys(config, refused, where)
    return deep_merge(copy.deepcopy(dict(defaults or {})), config)


def sorted_files(*parts: Mapping[str, str]) -> dict[str, str]:
    """The files of every part (later parts win on a path), sorted by path."""
    return dict(sorted({path: text for part in parts for path, text in part.items()}.items()))
