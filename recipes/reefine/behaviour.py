"""The request's behaviour check, written at plan time: a prompt that shows the requested behaviour, and how to tell
it is there (a regular expression on the agent's final answer, or an instruction to the judge), with optional
fixture files for the agent's workspace.

The check comes from the model, so it is untrusted: `parse_check` accepts only the documented shape within its
bounds and says why anything else is refused. A proposal without a usable check is not published as passed: when
the gate can run, it rejects the candidate with that reason (see `gate.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from recipes.reefine.answers import Unusable, first_json
from reef_contract import EvalTask
from reef_daemon.recipe_api import BadPattern, compiled

BEHAVIOUR_ID = "behaviour"
PROMPT_LIMIT = 2000
REGEX_LIMIT = 400
JUDGE_LIMIT = 1000
FIXTURE_FILES = 8
FIXTURE_BYTES = 16 * 1024
SHAPE = '{"prompt": "...", "regex": "..."} or {"prompt": "...", "judge": "..."}, optionally "files": {"path": "text"}'


@dataclass(frozen=True)
class BehaviourCheck:
    """A prompt, at most one way to check its answer (exactly one of regex and judge), and workspace files."""

    prompt: str
    regex: str | None
    judge: str | None
    fixture: dict[str, str] = field(default_factory=dict)

    def task(self, scenario: str, created_at: float) -> EvalTask:
        """The check as an evaluation task the gate runs like any protected one."""
        return {
            "id": BEHAVIOUR_ID,
            "scenario": scenario,
            "kind": "task",
            "prompt": self.prompt,
            "fixture": dict(self.fixture),
            "regex": self.regex,
            "judge": self.judge,
            "protected": True,
            "source_record": None,
            "created_at": created_at,
        }

    def to_json(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "regex": self.regex, "judge": self.judge, "files": sorted(self.fixture)}


@dataclass(frozen=True)
class Checked:
    """What the proposer wrote as the request's behaviour check: the check, or why there is no usable one
    (`problem`); both None when the proposal answers no request (a failure-driven one)."""

    check: BehaviourCheck | None
    problem: str | None


NO_REQUEST = Checked(None, None)


def plan_check(text: str | None, where: str) -> Checked:
    """The behaviour check in the JSON object `text` (under "check"), or why there is none; `where` names the text
    for the reason (the plan, check.json)."""
    if text is None or not text.strip():
        return Checked(None, f"{where} held no behaviour check")
    try:
        value = first_json(text)
    except Unusable:
        return Checked(None, f"{where} held no valid JSON")
    if isinstance(value, dict) and "check" in value:
        value = value["check"]
    elif (isinstance(value, dict) and "steps" in value) or isinstance(value, list):
        return Checked(None, f'{where} held no "check" object')
    try:
        return Checked(parse_check(value), None)
    except Unusable as exc:
        return Checked(None, f"{where}: {exc}")


def parse_check(value: Any) -> BehaviourCheck:
    """A behaviour check from the model's JSON value; `Unusable` says what is wrong with it."""
    if not isinstance(value, dict):
        raise Unusable(f"the behaviour check must be one object: {SHAPE}")
    prompt = value.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip() or len(prompt) > PROMPT_LIMIT:
        raise Unusable(f'the behaviour check needs a "prompt" of 1 to {PROMPT_LIMIT} characters')
    regex, judge = value.get("regex"), value.get("judge")
    if (regex is None) == (judge is None):
        raise Unusable('the behaviour check needs exactly one of "regex" and "judge"')
    if regex is not None:
        if not isinstance(regex, str) or not regex or len(regex) > REGEX_LIMIT:
            raise Unusable(f'the behaviour check\'s "regex" must be text of 1 to {REGEX_LIMIT} characters')
        try:
            compiled(regex)
        except BadPattern as exc:
            raise Unusable(f"the behaviour check's regex {exc}") from None
    if judge is not None and (not isinstance(judge, str) or not judge.strip() or len(judge) > JUDGE_LIMIT):
        raise Unusable(f'the behaviour check\'s "judge" must be an instruction of 1 to {JUDGE_LIMIT} characters')
    return BehaviourCheck(prompt.strip(), regex, judge.strip() if judge else None, _fixture(value.get("files")))


def _fixture(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > FIXTURE_FILES:
        raise Unusable(f'the behaviour check\'s "files" must be an object of at most {FIXTURE_FILES} path: text')
    files: dict[str, str] = {}
    for path, text in value.items():
        if not isinstance(text, str) or len(text.encode()) > FIXTURE_BYTES:
            raise Unusable(f"fixture file {str(path)[:80]!r} must be text of at most {FIXTURE_BYTES // 1024} KiB")
        files[safe_relative(path)] = text
    return files


def safe_relative(path: Any) -> str:
    """`path` when it is a plain relative path inside a workspace (no '..', not absolute, not hidden in .git)."""
    parts = PurePosixPath(str(path)).parts if isinstance(path, str) and path else ()
    if not parts or PurePosixPath(path).is_absolute() or any(part in ("..", ".git") for part in parts):
        raise Unusable(f"fixture path {str(path)[:80]!r} must be a relative path inside the workspace")
    return PurePosixPath(*parts).as_posix()
