"""Admission: the one check every proposed change passes before it can become a release, whoever proposed it.

Each refusal is a sentence the proposer (and a person) can act on. Values found to look like credentials are
never echoed: the refusal names the entry and field only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from adapters import Adapter, Binding, RenderRefused
from reef_daemon.harness.install.files import bound_files
from reef_daemon.harness.screens import SECRET_KEY, find_credential
from reef_harness import KINDS, OPERATIONS, Entry, Mutation, apply

# A binding for checking that a candidate installs; the real one is added on the person's machine.
CHECK_BINDING = Binding("http://127.0.0.1:8901", "candidate", "model", "candidate")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
MAX_NAME = 64
MAX_TEXT = 64 * 1024
# reef's own entries: the install script and in-session commands own them; no proposal may touch them.
RESERVED_IDS = frozenset(
    {"reef-requests", "reef-version-check", "reef-pi-extension-api", "reefine", "versions", "good", "bad"}
)
_CONSOLE_WRITE = re.compile(
    r"\bconsole\.(?:log|info|warn|error|debug|trace)\s*\(|\bprocess\.std(?:out|err)\.write\s*\("
)


class Refused(ValueError):
    """A change that admission refuses; `reasons` are the sentences, one per problem found."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__(" ".join(reasons))
        self.reasons = reasons


def admit(tree: list[Entry], mutations: list[Mutation], adapter: Adapter) -> list[Entry]:
    """The new tree if admission accepts the mutations against `tree` for `adapter`; `Refused` otherwise."""
    reasons = list(_mutation_problems(tree, mutations, adapter))
    if reasons:
        raise Refused(reasons)
    candidate = apply(tree, mutations)
    try:
        bound_files(adapter, candidate, CHECK_BINDING)  # what an install of it would write
    except RenderRefused as exc:
        raise Refused([str(exc)]) from None
    return candidate


def _mutation_problems(tree: list[Entry], mutations: list[Mutation], adapter: Adapter) -> Iterator[str]:
    ids = {entry.id: entry for entry in tree}
    if not mutations:
        yield "the change has no entries; write at least one entry that delivers the request"
    for mutation in mutations:
        if mutation.op not in OPERATIONS:
            yield f"'{mutation.op}' is not an operation; use create, update or remove"
            continue
        if not NAME.fullmatch(mutation.id) or len(mutation.id) > MAX_NAME:
            yield (
                f"entry id '{mutation.id[:MAX_NAME]}' is not allowed; ids start with a letter or digit and use "
                f"only letters, digits, '.', '_' and '-' (at most {MAX_NAME})"
            )
            continue
        if mutation.id in RESERVED_IDS:
            yield f"entry '{mutation.id}' is reef's own and cannot be changed; choose another id"
            continue
        existing = ids.get(mutation.id)
        if mutation.op == "create" and existing is not None:
            yield f"entry '{mutation.id}' already exists; update it instead of creating it"
        elif mutation.op in ("update", "remove") and existing is None:
            yield f"entry '{mutation.id}' does not exist, so it cannot be {mutation.op}d; create it instead"
        if mutation.entry is None:
            if mutation.op != "remove":
                yield f"{mutation.op} of '{mutation.id}' carries no kind and config"
            continue
        if existing is not None and existing.kind != mutation.entry.kind:
            yield (
                f"entry '{mutation.id}' is a {existing.kind}; an update cannot make it a {mutation.entry.kind} "
                f"(remove it and create a new entry)"
            )
        yield from entry_problems(mutation.entry, adapter)


def entry_problems(entry: Entry, adapter: Adapter) -> Iterator[str]:
    """What is wrong with one entry on its own, for this adapter."""
    if entry.kind not in KINDS:
        yield f"entry '{entry.id}' has kind '{entry.kind}'; kinds are {', '.join(KINDS)}"
        return
    if entry.kind not in adapter.renders:
        yield (
            f"entry '{entry.id}' is of kind {entry.kind}, which {adapter.name} cannot load; "
            f"use one of: {', '.join(adapter.renders)}"
        )
        return
    fields = KINDS[entry.kind]
    unknown = sorted(set(entry.config) - set(fields))
    if unknown:
        yield f"entry '{entry.id}' has unknown field(s) {', '.join(unknown)}; a {entry.kind} has {', '.join(fields)}"
    for name in fields:
        value = entry.config.get(name)
        if name == "data":
            yield from _config_problems(entry, value)
        elif not isinstance(value, str) or not value.strip():
            yield f"entry '{entry.id}' needs a non-empty text field '{name}'"
        elif name == "name" and (not NAME.fullmatch(value) or len(value) > MAX_NAME):
            yield (
                f"entry '{entry.id}' has name '{value[:MAX_NAME]}'; names start with a letter or digit and use "
                f"only letters, digits, '.', '_' and '-' (at most {MAX_NAME})"
            )
        elif name == "name" and value in RESERVED_IDS:
            yield f"entry '{entry.id}' uses the name '{value}', which is reef's own; choose another name"
        elif len(value) > MAX_TEXT:
            yield f"entry '{entry.id}' field '{name}' is longer than {MAX_TEXT} characters; shorten it"
        elif (rule := find_credential(value)) is not None:
            yield (
                f"entry '{entry.id}' field '{name}' contains what looks like {rule.what} (rule {rule.name}); "
                f"read secrets from the environment at run time instead"
            )
    if entry.kind == "extension" and isinstance(entry.config.get("code"), str):
        line = unguarded_console_write(entry.config["code"])
        if line is not None:
            yield (
                f"extension '{entry.id}' writes to the console on line {line} without a UI guard; use "
                f"ctx.ui.notify/setStatus, or check ctx.hasUI on the same or the previous line"
            )


def _config_problems(entry: Entry, data: Any) -> Iterator[str]:
    if not isinstance(data, dict) or not data:
        yield f"config entry '{entry.id}' needs 'data', a non-empty JSON object"
        return
    try:
        text = json.dumps(data)
    except (TypeError, ValueError):
        yield f"config entry '{entry.id}' data is not plain JSON"
        return
    if len(text) > MAX_TEXT:
        yield f"config entry '{entry.id}' data is larger than {MAX_TEXT} characters"
    for path, value in _leaves(data, "data"):
        key = path.rsplit(".", 1)[-1]
        literal = isinstance(value, str) and value.strip() and not value.strip().isdigit()
        if literal and SECRET_KEY.fullmatch(key):
            yield (
                f"config entry '{entry.id}' field '{path}' holds a literal secret; name an environment "
                f"variable instead of writing the value"
            )
        elif isinstance(value, str) and (rule := find_credential(value)) is not None:
            yield f"config entry '{entry.id}' field '{path}' contains what looks like {rule.what} (rule {rule.name})"


def _leaves(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _leaves(inner, f"{path}.{key}")
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _leaves(inner, f"{path}[{index}]")
    else:
        yield path, value


def unguarded_console_write(code: str) -> int | None:
    """The 1-based line of the first console write with no `hasUI` on it or on the previous non-empty line."""
    previous = ""
    for number, line in enumerate(code.splitlines(), start=1):
        if _CONSOLE_WRITE.search(line) and "hasUI" not in line and "hasUI" not in previous:
            return number
        if line.strip():
            previous = line
    return None
