"""Change requests: a person asks in words for a harness change (POST /reef/requests) and follows it
(GET /reef/requests/{id})."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from reef_contract._harness import Evidence


class RequestAck(TypedDict):
    """`POST /reef/requests` (202): the request's id and where to follow it."""

    agent_record_id: str
    scenario: str
    request_type: Literal["request"]
    progress_path: str


class Activity(TypedDict):
    at: float
    text: str


class RequestProgress(TypedDict):
    """Where a change request stands; once `settled`, its result, reason, release and version."""

    id: str
    scenario: str
    text: str | None
    session: str | None
    created_at: float
    state: str  # queued | proposing | ... | settling | settled
    activity: list[Activity]
    design: str | None
    result: NotRequired[str]
    reason: NotRequired[str | None]
    release: NotRequired[str | None]
    version: NotRequired[str | None]  # None when the request made no version (skipped, rejected)
    how_to_use: NotRequired[str | None]
    evidence: NotRequired[Evidence | None]  # the evaluation gate's, once settled


class RequestState(TypedDict):
    """Where a change request stands, as a `request` event says: its phase and the latest activity line (None when
    it was just filed)."""

    id: str
    state: str
    activity: str | None
