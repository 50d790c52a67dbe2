"""The harness tree: a flat list of entries with stable ids, each of one kind, changed by mutations.

An entry is data only: which files it becomes is each adapter's business (`adapters/`). The model binding
(URL, token, model) is never part of a tree; the install script adds it on the person's machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# kind -> the config fields it carries (all strings, except config's `data`, a JSON object).
KINDS: dict[str, tuple[str, ...]] = {
    "skill": ("name", "text"),
    "rules": ("text",),
    "command": ("name", "text"),
    "extension": ("name", "code"),
    "config": ("data",),
}
OPERATIONS = ("create", "update", "remove")


@dataclass(frozen=True)
class Entry:
    """One part of a harness. `config` holds the kind's fields (see `KINDS`)."""

    id: str
    kind: str
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The file name of a named kind (skill, command, extension); the id otherwise."""
        name = self.config.get("name")
        return name if isinstance(name, str) and name else self.id

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "config": self.config}


@dataclass(frozen=True)
class Mutation:
    """A change to one entry: `create` and `update` carry the whole new entry; `remove` only the id."""

    op: str
    id: str
    entry: Entry | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"op": self.op, "id": self.id}
        if self.entry is not None:
            data["kind"] = self.entry.kind
            data["config"] = self.entry.config
        return data


def entries_from_json(items: list[dict[str, Any]]) -> list[Entry]:
    """Entries as stored in a release manifest (written by reef itself, so trusted to be well-formed)."""
    return [Entry(str(item["id"]), str(item["kind"]), dict(item["config"])) for item in items]


def apply(tree: list[Entry], mutations: list[Mutation]) -> list[Entry]:
    """The tree after the mutations, in order. Admission has checked them; a bad one raises ValueError."""
    result = list(tree)
    for mutation in mutations:
        index = next((i for i, entry in enumerate(result) if entry.id == mutation.id), None)
        if mutation.op == "remove":
            if index is None:
                raise ValueError(f"remove of missing entry '{mutation.id}'")
            del result[index]
        elif mutation.entry is None:
            raise ValueError(f"{mutation.op} of '{mutation.id}' carries no entry")
        elif mutation.op == "create" and index is None:
            result.append(mutation.entry)
        elif mutation.op == "update" and index is not None:
            result[index] = mutation.entry
        else:
            raise ValueError(f"cannot {mutation.op} entry '{mutation.id}'")
    return result


def touches_kind(tree: list[Entry], mutations: list[Mutation], kind: str) -> bool:
    """Does any mutation create, change or remove an entry of this kind?"""
    kinds_by_id = {entry.id: entry.kind for entry in tree}
    for mutation in mutations:
        if (mutation.entry is not None and mutation.entry.kind == kind) or kinds_by_id.get(mutation.id) == kind:
            return True
    return False
