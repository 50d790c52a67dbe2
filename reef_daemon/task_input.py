"""Checking a task sent to `POST /reef/scenarios/{s}/tasks`: every refusal is a 400 that starts with the field at
fault, and nothing is stored."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any, NoReturn

from reef_contract import (
    MAX_FIXTURE_CHARS,
    MAX_FIXTURE_FILES,
    MAX_FIXTURE_NAME_BYTES,
    MAX_FIXTURE_PATH_CHARS,
    MAX_TASK_CHECK_CHARS,
    MAX_TASK_PROMPT_CHARS,
)
from reef_daemon.errors import BadRequest
from reef_daemon.store import TaskDraft
from reef_daemon.untrusted_regex import BadPattern, RegexBounds, checked

FIELDS = ("prompt", "fixture", "regex", "judge", "protected")


async def checked_task(scenario: str, body: dict[str, Any], bounds: RegexBounds) -> TaskDraft:
    """The task `body` describes, or a BadRequest naming the first field at fault; its regex is compiled off the
    event loop, within `bounds`."""
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        _refuse(unknown[0], f"is not a field of a task; send {', '.join(FIELDS)}")
    regex = _optional_text(body, "regex")
    judge = _optional_text(body, "judge")
    if regex is not None and judge is not None:
        _refuse("judge", "a task has at most one check: send regex or judge, not both")
    protected = body.get("protected", False)
    if not isinstance(protected, bool):
        _refuse("protected", "must be true or false")
    prompt, fixture = _prompt(body.get("prompt")), _fixture(body.get("fixture", {}))
    if regex is not None:  # last: it is the one check that costs time
        try:
            await checked(regex, bounds)
        except BadPattern as exc:
            _refuse("regex", str(exc))
    return TaskDraft(scenario, prompt, fixture, regex=regex, judge=judge, protected=protected)


def _prompt(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        _refuse("prompt", "must be a non-empty string: what the agent is asked")
    if len(value) > MAX_TASK_PROMPT_CHARS:
        _refuse("prompt", f"is longer than {MAX_TASK_PROMPT_CHARS} characters")
    return value


def _optional_text(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        _refuse(name, "must be a non-empty string, or null for none")
    if len(value) > MAX_TASK_CHECK_CHARS:
        _refuse(name, f"is longer than {MAX_TASK_CHECK_CHARS} characters")
    return value


def _fixture(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        _refuse("fixture", "must be an object of relative file paths to file text")
    if len(value) > MAX_FIXTURE_FILES:
        _refuse("fixture", f"has {len(value)} files; at most {MAX_FIXTURE_FILES}")
    total = 0
    for path, text in value.items():
        _check_path(path)
        if not isinstance(text, str):
            _refuse("fixture", f"the file '{path}' must be text (a string)")
        total += len(text)
    if total > MAX_FIXTURE_CHARS:
        _refuse("fixture", f"holds {total} characters of files; at most {MAX_FIXTURE_CHARS}")
    folders = {str(parent) for path in value for parent in PurePosixPath(path).parents}
    clash = sorted(set(value) & folders)
    if clash:
        _refuse("fixture", f"'{clash[0]}' is both a file and a folder")
    return dict(value)


def _check_path(path: str) -> None:
    """A path inside the task's workspace: relative, without `.` or `..` parts, printable, of bounded length."""
    shown = path[:80]
    if not path or len(path) > MAX_FIXTURE_PATH_CHARS:
        _refuse("fixture", f"the path '{shown}' must have 1 to {MAX_FIXTURE_PATH_CHARS} characters")
    if path.startswith("/") or "\\" in path or re.match(r"^[A-Za-z]:", path):
        _refuse("fixture", f"the path '{shown}' must be relative, with / between folders")
    if any(part in ("", ".", "..") for part in path.split("/")):
        _refuse("fixture", f"the path '{shown}' may not have empty, '.' or '..' parts")
    if not path.isprintable():
        _refuse("fixture", f"the path {shown!r} has characters that cannot be shown")
    for part in path.split("/"):
        if len(part.encode("utf-8", "surrogatepass")) > MAX_FIXTURE_NAME_BYTES:
            _refuse("fixture", f"the path '{shown}' has a name over {MAX_FIXTURE_NAME_BYTES} bytes (as UTF-8)")


def _refuse(field: str, problem: str) -> NoReturn:
    raise BadRequest(f"{field}: {problem}", type="invalid_task")
