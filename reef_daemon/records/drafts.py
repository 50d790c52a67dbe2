"""Records before they are stored: an exchange as the proxy (or an import) saw it, and a record a client sends with
its own content. The store keeps them; what it derives from an exchange is in `summary`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reef_contract import PERSON_SOURCE, ClientRecordType, ReportSource


@dataclass
class InferenceDraft:
    """An exchange as the proxy saw it, before the writer derives its summary and stores it."""

    id: str
    scenario: str
    route: str
    created_at: float
    model: str | None  # as the client asked; the response may name the model more exactly
    request: bytes
    status: int
    response: bytes
    stream: bool
    complete: bool
    error: str | None
    ttft_ms: float | None
    duration_ms: float | None  # None: not known (an imported conversation that had no timestamps)
    overhead_ms: float | None
    tags: dict[str, str] = field(default_factory=dict)
    release: str | None = None
    tokens: dict[str, Any] | None = None
    payload: dict[str, Any] | None = None  # the request as already parsed (the proxy reads it), so it is read once


@dataclass(frozen=True)
class ClientRecordDraft:
    """A record a client sends with its own content: a report, or a change request."""

    id: str
    scenario: str
    type: ClientRecordType
    created_at: float
    content: dict[str, Any]  # a report: {score?, feedback?, references, metadata?, evidence?}; a request: {text, ...}
    content_hash: str
    source: ReportSource = PERSON_SOURCE  # a report's: a person, or what it was derived from
