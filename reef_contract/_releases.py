"""Steps and releases: GET /reef/scenarios/{s}/releases, promote, rollback."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class StepRow(TypedDict):
    """A committed step of a scenario's recipe (announced by `step` and `release` events)."""

    scenario: str
    step: int
    version: str | None  # vN counts the steps that made a version; None for a skipped or rejected step
    operation: str  # training | promote | rollback | creation
    result: str  # selected | rejected | skipped | pending
    release_id: str | None
    parent_release_id: str | None
    request_id: str | None
    consumed: list[str]
    metrics: dict[str, Any]
    created_at: float | None


class ReleaseRequest(TypedDict):
    """The change request a release answered."""

    id: str
    text: str | None
    session: str | None


class ReleaseRow(StepRow):
    """A release as `GET /reef/scenarios/{s}/releases` lists it (and promote and rollback answer with it).
    A recipe that publishes harness releases adds whether it waits for review and the request it answered."""

    current: bool
    pending: NotRequired[bool]
    promoted_as: NotRequired[str | None]
    restorable: NotRequired[bool]
    request: NotRequired[ReleaseRequest | None]


class ReleaseList(TypedDict):
    scenario: str
    releases: list[ReleaseRow]


class ReleaseFiles(TypedDict):
    """A release's files, by file name, base64-encoded: for a weight recipe's LoRA adapter, PEFT's layout
    (`adapter_config.json`, `adapter_model.safetensors`)."""

    scenario: str
    release_id: str
    files: dict[str, str]
