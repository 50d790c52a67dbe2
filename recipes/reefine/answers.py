"""Reading the model's answers. A model's text is untrusted: anything not in the expected shape is refused with a
sentence that goes back to the model on the next attempt.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from reef_daemon.recipe_api import find_credential
from reef_harness import Entry, Mutation

REQUIRE_KINDS = ("env", "binary", "permission", "service")
MAX_REQUIRES = 10
MAX_PROMPT = 200
_FENCED = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)


class Unusable(ValueError):
    """The answer cannot be used; the message says why, for the model's next attempt (with `hint`, what to answer
    instead). `problem` is the why alone, for a person reading why a request was skipped."""

    def __init__(self, problem: str, hint: str | None = None) -> None:
        super().__init__(f"{problem}; {hint}" if hint else problem)
        self.problem = problem


@dataclass
class Answer:
    design: str
    mutations: list[Mutation]
    requires: list[dict[str, str]] = field(default_factory=list)


@dataclass
class Review:
    delivers: bool
    covered: list[str]
    uncovered: list[str]


def first_json(text: str) -> Any:
    """The first JSON value in a model's text (a ```json fence is looked in first)."""
    candidates = [match.group(1) for match in _FENCED.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        for index, char in enumerate(candidate):
            if char in "[{":
                try:
                    value, _ = decoder.raw_decode(candidate, index)
                except ValueError:
                    continue
                return value
    raise Unusable("the answer held no valid JSON", hint="answer with the JSON asked for and nothing else")


def parse_answer(text: str, tree: list[Entry]) -> Answer:
    """A design, mutations against `tree` and requires items, from the answer's JSON array."""
    value = first_json(text)
    if not isinstance(value, list) or not value:
        raise Unusable('the answer must be one JSON array whose first object is {"design": "..."}')
    head, *items = value
    design = head.get("design") if isinstance(head, dict) else None
    if not isinstance(design, str) or not design.strip():
        raise Unusable('the first object of the array must be {"design": "..."} with the design as text')
    existing = {entry.id for entry in tree}
    mutations: list[Mutation] = []
    requires: list[dict[str, str]] = []
    for position, item in enumerate(items, start=2):
        if not isinstance(item, dict):
            raise Unusable(f"item {position} of the array is not an object")
        if "requires" in item and len(item) == 1:
            requires = parse_requires(item["requires"])
            continue
        entry_id = item.get("id")
        if not isinstance(entry_id, str) or not entry_id:
            raise Unusable(f'item {position} has no "id"')
        if item.get("remove") is True:
            mutations.append(Mutation("remove", entry_id))
            continue
        kind, config = item.get("kind"), item.get("config")
        if not isinstance(kind, str) or not isinstance(config, dict):
            raise Unusable(f'entry \'{entry_id[:64]}\' needs "kind" (text) and "config" (an object)')
        op = "update" if entry_id in existing else "create"
        mutations.append(Mutation(op, entry_id, Entry(entry_id, kind, config)))
    return Answer(design.strip(), mutations, requires)


def parse_requires(value: Any) -> list[dict[str, str]]:
    if not isinstance(value, list) or len(value) > MAX_REQUIRES:
        raise Unusable(f'"requires" must be a list of at most {MAX_REQUIRES} objects')
    items = []
    for item in value:
        if not isinstance(item, dict):
            raise Unusable('each requires item must be an object {"name", "kind", "prompt"}')
        name, kind, prompt = item.get("name"), item.get("kind"), item.get("prompt", "")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}", name):
            raise Unusable('each requires item needs a "name": an environment variable or program name')
        if kind not in REQUIRE_KINDS:
            raise Unusable(f"requires item '{name}' has kind {kind!r}; kinds are {', '.join(REQUIRE_KINDS)}")
        if not isinstance(prompt, str) or len(prompt) > MAX_PROMPT:
            raise Unusable(f"requires item '{name}' needs a \"prompt\" of at most {MAX_PROMPT} characters")
        if find_credential(prompt) is not None:
            raise Unusable(f"requires item '{name}' prompt contains what looks like a credential; remove it")
        items.append({"name": name, "kind": str(kind), "prompt": prompt})
    return items


def parse_plan(text: str) -> list[str]:
    """The steps of a plan answer: `{"steps": [{"step": ..., "needs_tool": ...}], "check": ...}` (or the array of
    steps alone; the check is read by `behaviour.plan_check`)."""
    value = first_json(text)
    if isinstance(value, dict):
        value = value.get("steps")
    if not isinstance(value, list):
        raise Unusable('the plan must be a JSON object with "steps", a JSON array')
    steps = []
    for item in value[:20]:
        if isinstance(item, dict) and isinstance(item.get("step"), str):
            tool = " (needs a tool)" if item.get("needs_tool") is True else ""
            steps.append(item["step"][:400] + tool)
    if not steps:
        raise Unusable("the plan has no steps")
    return steps


def parse_review(text: str) -> Review:
    value = first_json(text)
    if not isinstance(value, dict) or not isinstance(value.get("delivers"), bool):
        raise Unusable('the review must be one JSON object with "delivers": true or false')
    return Review(value["delivers"], _strings(value.get("covered")), _strings(value.get("uncovered")))


def parse_skill(text: str) -> Entry:
    """The one skill of a failure-driven proposal."""
    value = first_json(text)
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, dict) or value.get("kind") != "skill" or not isinstance(value.get("config"), dict):
        raise Unusable('the answer must be one JSON object {"id", "kind": "skill", "config": {...}}')
    entry_id = value.get("id") or value["config"].get("name")
    if not isinstance(entry_id, str) or not entry_id:
        raise Unusable('the skill needs an "id"')
    return Entry(entry_id, "skill", value["config"])


def _strings(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    return [item[:400] for item in value if isinstance(item, str) and item.strip()][:20]
