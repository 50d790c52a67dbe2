"""The text proposer: the served model plans, answers with a design and entries, and reviews its own answer.

Up to `ATTEMPTS` answers; admission refusals and review findings go back to the model as data. The result is a
`Proposal` (an admitted candidate tree whose review says it delivers) or a `Declined` with the result the step
records (`rejected`: candidates were made and none delivered; `skipped`: nothing usable came back).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from adapters import Adapter
from recipes.reefine import prompts
from recipes.reefine.answers import (
    Answer,
    Review,
    Unusable,
    parse_answer,
    parse_plan,
    parse_review,
    parse_skill,
)
from recipes.reefine.behaviour import NO_REQUEST, Checked, plan_check
from recipes.reefine.model import ServedModel
from reef_daemon.recipe_api import Refused, admit
from reef_harness import Entry, Mutation

ATTEMPTS = 3
PLAN_TOKENS = 1024
ANSWER_TOKENS = 8192
REVIEW_TOKENS = 2048
SKILL_TOKENS = 4096
Note = Callable[[str], Awaitable[None]]


@dataclass
class Proposal:
    design: str
    mutations: list[Mutation]
    candidate: list[Entry]
    requires: list[dict[str, str]]
    review: dict[str, Any]
    attempts: int
    evidence: dict[str, Any] = field(default_factory=dict)  # the agent proposer's run
    checked: Checked = NO_REQUEST  # the request's behaviour check, for the gate


@dataclass
class Declined:
    result: str  # rejected | skipped
    reason: str
    attempts: int
    design: str | None = None
    findings: list[str] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)  # the agent proposer's run


async def propose_for_request(
    model: ServedModel, request: str, tree: list[Entry], adapter: Adapter, note: Note
) -> Proposal | Declined:
    """Plan, then up to three answers, each admitted and reviewed, for one change request."""
    plan, checked = await _plan(model, request, note)
    feedback: list[str] = []
    problem = "no answer"  # the last unusable answer's problem, in a person's words
    reviewed_any = refused_any = False
    design: str | None = None
    for attempt in range(1, ATTEMPTS + 1):
        await note(f"attempt {attempt}: asking for a design and entries")
        try:
            answer = parse_answer(
                await model.ask(
                    prompts.ANSWER_SYSTEM,
                    prompts.answer_prompt(request, tree, adapter, plan, feedback),
                    max_tokens=ANSWER_TOKENS,
                ),
                tree,
            )
        except Unusable as exc:
            feedback, problem = [str(exc)], exc.problem
            await note(f"attempt {attempt}: unusable answer: {exc.problem}")
            continue
        design = answer.design
        if not answer.mutations:
            await note(f"attempt {attempt}: the design says the harness cannot deliver this; no entries written")
            return Declined("skipped", "the proposer found no entries that deliver the request", attempt, design)
        try:
            candidate = admit(tree, answer.mutations, adapter)
        except Refused as exc:
            refused_any = True
            feedback = exc.reasons
            await note(f"attempt {attempt}: admission refused: {' '.join(exc.reasons)}")
            continue
        review = await review_answer(model, request, answer, note)
        reviewed_any = True
        if review.delivers:
            await note(f"attempt {attempt}: the review says the entries deliver the request")
            review_json = {"covered": review.covered, "uncovered": review.uncovered}
            return Proposal(design, answer.mutations, candidate, answer.requires, review_json, attempt, checked=checked)
        feedback = review.uncovered or ["the review found that the entries do not deliver the request"]
        await note(f"attempt {attempt}: the review found gaps: {' '.join(feedback)}")
    if reviewed_any:
        reason = "the review found that no attempt delivers the request: " + " ".join(feedback)
        return Declined("rejected", reason, ATTEMPTS, design, feedback)
    if refused_any:
        reason = "admission refused every attempt: " + " ".join(feedback)
        return Declined("rejected", reason, ATTEMPTS, design, feedback)
    return Declined("skipped", no_usable_answer(ATTEMPTS, problem), ATTEMPTS, design)


def no_usable_answer(attempts: int, problem: str) -> str:
    """Why a request was skipped when no attempt gave a usable answer, for the person who filed it."""
    return (
        f"the served model gave no usable answer in {attempts} attempt(s) (the last: {problem}). Harness changes "
        "need a capable model; a small one such as the embedded model rarely writes one. Serve a capable model with "
        "--inference.upstream-url and --inference.upstream-model, then file the request again"
    )


async def _plan(model: ServedModel, request: str, note: Note) -> tuple[str | None, Checked]:
    """A list of steps, as text for the answer prompt (None when the model gave no usable plan: not fatal), and
    the behaviour check the plan wrote (or why there is none: the gate then rejects the candidate)."""
    text = await model.ask(prompts.PLAN_SYSTEM, prompts.plan_prompt(request), max_tokens=PLAN_TOKENS)
    checked = await asyncio.to_thread(plan_check, text, "the plan")
    if checked.problem is not None:
        await note(f"plan: no usable behaviour check ({checked.problem})")
    try:
        steps = parse_plan(text)
    except Unusable as exc:
        await note(f"plan: unusable ({exc.problem}); continuing without one")
        return None, checked
    await note(f"plan: {len(steps)} step(s)")
    return "\n".join(f"{number}. {step}" for number, step in enumerate(steps, start=1)), checked


async def review_answer(model: ServedModel, request: str, answer: Answer, note: Note) -> Review:
    """The model's review of an admitted answer; asked once more if the first review is not valid JSON."""
    written = [mutation.entry for mutation in answer.mutations if mutation.entry is not None]
    removed = [mutation.id for mutation in answer.mutations if mutation.op == "remove"]
    prompt = prompts.review_prompt(request, answer.design, written, removed)
    for _ in range(2):
        try:
            return parse_review(await model.ask(prompts.REVIEW_SYSTEM, prompt, max_tokens=REVIEW_TOKENS))
        except Unusable as exc:
            await note(f"review: unusable ({exc.problem})")
    return Review(False, [], ["the review could not be read, so the change is not known to deliver the request"])


async def propose_from_failures(
    model: ServedModel, traces: Sequence[Mapping[str, str]], tree: list[Entry], adapter: Adapter, note: Note
) -> Proposal | Declined:
    """One skill written from low-scored conversations; created, or updated when its id exists."""
    await note(f"asking for one skill from {len(traces)} low-scored conversation(s)")
    text = await model.ask(prompts.FAILURE_SYSTEM, prompts.failure_prompt(traces, tree), max_tokens=SKILL_TOKENS)
    try:
        entry = parse_skill(text)
        op = "update" if any(existing.id == entry.id for existing in tree) else "create"
        mutations = [Mutation(op, entry.id, entry)]
        candidate = admit(tree, mutations, adapter)
    except Unusable as exc:
        return Declined("skipped", f"the served model gave no usable skill: {exc.problem}", 1)
    except Refused as exc:
        return Declined("rejected", "admission refused the skill: " + " ".join(exc.reasons), 1)
    design = f"A skill '{entry.name}' written from low-scored conversations.\n\nHow to use: the agent loads it itself."
    return Proposal(design, mutations, candidate, [], {}, 1)
