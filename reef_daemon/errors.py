"""The daemon's error types. Each maps to one HTTP status and a snake_case type name.

Handlers raise these; one middleware turns them into `{"error": {"type", "message"}}` bodies.
"""

from __future__ import annotations


class ReefError(Exception):
    """A failure a client can act on. The message is one sentence for a person."""

    status = 400
    type = "bad_request"

    def __init__(self, message: str, *, type: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if type is not None:
            self.type = type

    def to_json(self) -> dict[str, dict[str, str]]:
        return {"error": {"type": self.type, "message": self.message}}


class BadRequest(ReefError):
    status = 400
    type = "bad_request"


class Unauthorized(ReefError):
    status = 401
    type = "unauthorized"


class NotFound(ReefError):
    status = 404
    type = "not_found"


class Conflict(ReefError):
    status = 409
    type = "conflict"


class RequestTimeout(ReefError):
    status = 408
    type = "request_timeout"


class PayloadTooLarge(ReefError):
    status = 413
    type = "payload_too_large"


class Unsupported(ReefError):
    status = 501
    type = "unsupported"


class UpstreamFailed(ReefError):
    status = 502
    type = "upstream_failed"


class NotReady(ReefError):
    status = 503
    type = "not_ready"


class StoreError(NotReady):
    """The record store could not commit; the daemon log has the database's own words."""

    type = "store_failed"
