"""`reef-<agent> versions` speaks the words of `reef versions` and of the JSON: operation, then result; a step that
published nothing shows no release and no version, and the versions after it run on without a gap."""

from __future__ import annotations

from adapters.wrapper.commands import version_table
from reef_client import ReleaseRow


def row(
    step: int, version: str | None, operation: str, result: str, release_id: str | None, **extra: object
) -> ReleaseRow:
    base: ReleaseRow = {
        "scenario": "s", "step": step, "version": version, "operation": operation, "result": result,
        "release_id": release_id, "parent_release_id": None, "request_id": None, "consumed": [], "metrics": {},
        "created_at": None, "current": False,
    }  # fmt: skip
    return {**base, **extra}  # type: ignore[typeddict-item]


def test_the_wrapper_table_uses_the_json_words() -> None:
    rows = [
        row(3, "v2", "training", "selected", "c" * 32),
        row(2, None, "training", "skipped", None, request={"id": "r", "text": "something vague", "session": None}),
        row(1, "v1", "training", "selected", "b" * 32, current=True),
        row(0, "v0", "creation", "selected", "a" * 32),
    ]
    lines = version_table(rows, "a" * 32).splitlines()
    assert lines[0].split() == ["version", "release", "operation", "result", "status"]
    assert lines[1].split() == ["v0", "aaaaaaaa", "creation", "selected", "installed"]
    assert lines[2].split() == ["v1", "bbbbbbbb", "training", "selected", "current"]
    assert lines[3].split() == ["-", "-", "training", "skipped"]  # a skipped step takes no version number
    assert lines[4].strip() == "something vague"
    assert lines[5].split() == ["v2", "cccccccc", "training", "selected"]
