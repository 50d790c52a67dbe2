"""The one HTTP client of the daemon API. The CLI, the TUI and the adapter wrappers all talk to reef through it.

Every failure is one of three exceptions, each carrying a sentence a person can act on:
`DaemonUnreachable` (nothing answers at the URL), `Unauthorized` (the daemon wants a token) and `ApiError`
(the daemon refused the call; `type` and `message` are the daemon's own).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import Any, NamedTuple, NotRequired, TypedDict
from urllib.parse import quote

import httpx

from reef_cli.sse import Event, parse_events
from reef_daemon.contract import Usage

__all__ = [
    "ApiError",
    "ChatReply",
    "DaemonUnreachable",
    "Event",
    "RecordPage",
    "RecordRow",
    "ReefClient",
    "ReefClientError",
    "ReportAck",
    "ScenarioRow",
    "Unauthorized",
]

DEFAULT_TIMEOUT_S = 30.0
# The events stream sends a keep-alive every 15 s; a minute of silence means the daemon is gone.
EVENTS_READ_TIMEOUT_S = 60.0
RECONNECT_PAUSE_S = 1.0


class ReefClientError(Exception):
    """Base of the client's failures. `str(error)` is one sentence for a person."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class DaemonUnreachable(ReefClientError):
    """Nothing answered at the daemon's URL (not started, wrong port, or it went away)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"no reef daemon answers at {url} ({reason})")
        self.url = url
        self.reason = reason


class Unauthorized(ReefClientError):
    """The daemon needs a token and none, or a wrong one, was sent."""

    def __init__(self, url: str, message: str) -> None:
        super().__init__(message)
        self.url = url


class ApiError(ReefClientError):
    """The daemon answered with an error: its HTTP status, error type and message."""

    def __init__(self, status: int, type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.type = type


class RecordRow(TypedDict):
    """A record as `GET /reef/records` lists it."""

    sequence: int
    id: str
    scenario: str
    type: str
    created_at: float
    route: str | None
    model: str | None
    status: int | None
    complete: bool | None
    duration_ms: float | None
    usage: Usage
    score: float | None
    release: str | None


class RecordPage(TypedDict):
    """A page of `GET /reef/records`, with the cursors of the pages after and before it."""

    records: list[RecordRow]
    next_after: int | None
    next_before: int | None


class ScenarioRow(TypedDict):
    """A scenario as `GET /reef/scenarios` lists it."""

    scenario: str
    recipe: str
    training_mode: str
    created_at: float
    records: NotRequired[int]
    reports: NotRequired[int]
    unscored: NotRequired[int]
    current_release: NotRequired[str | None]


class ReportAck(TypedDict):
    """The daemon's answer to a stored report: the report's id and scenario."""

    agent_record_id: str
    scenario: str
    request_type: str


class ChatReply(NamedTuple):
    """A chat completion's receipt (the record id to score) and its text."""

    receipt: str
    text: str


class ReefClient:
    """A synchronous client of one daemon. Use it as a context manager, or call `close()`."""

    def __init__(self, url: str, token: str | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s)

    def __enter__(self) -> ReefClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections to the daemon."""
        self._http.close()

    # --- daemon ---------------------------------------------------------------------------------------------

    def healthz(self) -> bool:
        """True when the daemon answers `/healthz` (no token needed); raises DaemonUnreachable otherwise."""
        body = self._call("GET", "/healthz")
        return bool(body.get("ok"))

    def status(self) -> dict[str, Any]:
        """Version, uptime, recipe, runtime, per-scenario counts and training state."""
        body: dict[str, Any] = self._call("GET", "/reef/status")
        return body

    # --- scenarios ------------------------------------------------------------------------------------------

    def scenarios(self) -> list[ScenarioRow]:
        """The active scenarios with their record, report and unscored counts."""
        rows: list[ScenarioRow] = self._call("GET", "/reef/scenarios")["scenarios"]
        return rows

    def create_scenario(self, name: str, training_mode: str | None = None) -> tuple[ScenarioRow, bool]:
        """Create a scenario; returns it and whether it was new (False when it already existed)."""
        body: dict[str, Any] = {"name": name}
        if training_mode is not None:
            body["training_mode"] = training_mode
        response = self._send("POST", "/reef/scenarios", json=body)
        row: ScenarioRow = response.json()
        return row, response.status_code == 201

    def archive_scenario(self, name: str) -> str:
        """Archive a scenario (its records are kept under a new name); returns that name."""
        body = self._call("DELETE", f"/reef/scenarios/{quote(name, safe='')}")
        return str(body["archived_as"])

    # --- records and reports --------------------------------------------------------------------------------

    def records(
        self,
        *,
        scenario: str | None = None,
        type: str | None = None,
        unscored: bool = False,
        after: int | None = None,
        before: int | None = None,
        limit: int | None = None,
    ) -> RecordPage:
        """One page of records: the newest, descending, by default; ascending from `after`; older than `before`."""
        params: dict[str, str] = {}
        for key, value in (("scenario", scenario), ("type", type), ("after", after), ("before", before),
                           ("limit", limit)):  # fmt: skip
            if value is not None:
                params[key] = str(value)
        if unscored:
            params["unscored"] = "true"
        page: RecordPage = self._call("GET", "/reef/records", params=params)
        return page

    def record(self, record_id: str) -> dict[str, Any]:
        """One record in full: request, response, timings, tokens, tags and the reports that reference it."""
        body: dict[str, Any] = self._call("GET", f"/reef/records/{quote(record_id, safe='')}")
        return body

    def report(
        self,
        scenario: str,
        references: list[str],
        *,
        score: float | None = None,
        feedback: str | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        agent_record_id: str | None = None,
    ) -> ReportAck:
        """Send a score and/or feedback for receipts of one scenario. The same `agent_record_id` with the same
        content is a safe retry; with different content the daemon answers 409 (ApiError)."""
        body: dict[str, Any] = {"references": references}
        for key, value in (("score", score), ("feedback", feedback), ("metadata", metadata),
                           ("agent_record_id", agent_record_id)):  # fmt: skip
            if value is not None:
                body[key] = value
        ack: ReportAck = self._call("POST", "/reef/report", json=body, headers={"x-reef-scenario": scenario})
        return ack

    # --- inference ------------------------------------------------------------------------------------------

    def chat(self, scenario: str, messages: list[dict[str, Any]], **params: Any) -> ChatReply:
        """One chat completion through the proxy, as an agent would send it; returns the receipt and the text."""
        body = {"model": "reef", "messages": messages, **params}
        response = self._send("POST", "/v1/chat/completions", json=body, headers={"x-reef-scenario": scenario})
        try:
            text = response.json()["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            raise ApiError(response.status_code, "invalid_response", "the chat completion had no message") from None
        return ChatReply(response.headers.get("x-reef-agent-record-id", ""), str(text))

    # --- events ---------------------------------------------------------------------------------------------

    def events(self, *, after: int | None = None, scenario: str | None = None) -> Iterator[Event]:
        """Events as they are committed, forever. With `after`, replays everything after that sequence first.
        When the daemon ends the stream (a subscriber that fell behind is dropped), it resumes where it was."""
        last = after
        while True:
            resumed_from = last
            headers = {"Last-Event-ID": str(last)} if last is not None else {}
            params = {"scenario": scenario} if scenario else {}
            timeout = httpx.Timeout(DEFAULT_TIMEOUT_S, read=EVENTS_READ_TIMEOUT_S)
            try:
                with self._http.stream(
                    "GET", "/reef/events", params=params, headers=headers, timeout=timeout
                ) as response:
                    if response.status_code >= 400:
                        response.read()
                        self._raise_for(response)
                    for event in parse_events(response.iter_lines()):
                        last = event.sequence
                        yield event
            except httpx.TransportError as exc:
                raise DaemonUnreachable(self.url, _reason(exc)) from None
            if last == resumed_from:  # closed before anything new arrived: do not spin on reconnects
                time.sleep(RECONNECT_PAUSE_S)

    # --- harness (reefine) ----------------------------------------------------------------------------------

    def train(self, scenario: str, text: str, *, session: str | None = None) -> dict[str, Any]:
        """File a change request for a scenario's harness; returns its id and progress path (202 = queued)."""
        body: dict[str, Any] = {"text": text}
        if session is not None:
            body["session"] = session
        answer: dict[str, Any] = self._call("POST", "/reef/train", json=body, headers={"x-reef-scenario": scenario})
        return answer

    def request_progress(self, request_id: str) -> dict[str, Any]:
        """Where a change request stands: state, activity, design, and once settled its result and version."""
        progress: dict[str, Any] = self._call("GET", f"/reef/requests/{quote(request_id, safe='')}")
        return progress

    def releases(self, scenario: str) -> list[dict[str, Any]]:
        """A scenario's versions, newest first, with result, pending and current flags and the request text."""
        rows: list[dict[str, Any]] = self._call("GET", f"/reef/scenarios/{quote(scenario, safe='')}/releases")[
            "releases"
        ]
        return rows

    def change_release(self, scenario: str, operation: str, release_id: str) -> dict[str, Any]:
        """`promote` a pending release or `rollback` to an earlier one; returns the new head's step row."""
        path = f"/reef/scenarios/{quote(scenario, safe='')}/{operation}"
        step: dict[str, Any] = self._call("POST", path, json={"release_id": release_id})
        return step

    def harness(self, scenario: str, release_id: str | None = None) -> dict[str, Any]:
        """A release's harness files (the served one by default), with its version and parent release."""
        params = {"release_id": release_id} if release_id else {}
        body: dict[str, Any] = self._call("GET", "/reef/harness", params=params, headers={"x-reef-scenario": scenario})
        return body

    def adapters(self) -> list[dict[str, Any]]:
        """The agents a harness can be installed for (pi, codex, dsh) and what each renders."""
        rows: list[dict[str, Any]] = self._call("GET", "/reef/harness/adapters")["adapters"]
        return rows

    def install_script(self, scenario: str, adapter: str, release_id: str | None = None) -> str:
        """The POSIX sh script that installs a scenario's harness release for `adapter`."""
        params = {"adapter": adapter, **({"release_id": release_id} if release_id else {})}
        response = self._send("GET", "/reef/harness/install", params=params, headers={"x-reef-scenario": scenario})
        return response.text

    # --- plumbing -------------------------------------------------------------------------------------------

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._send(method, path, **kwargs)
        try:
            return response.json()
        except ValueError:
            raise ApiError(
                response.status_code,
                "invalid_response",
                f"{self.url}{path} did not answer JSON; is it a reef daemon?",
            ) from None

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise DaemonUnreachable(self.url, _reason(exc)) from None
        self._raise_for(response)
        return response

    def _raise_for(self, response: httpx.Response) -> None:
        if response.status_code < 400:
            return
        type_, message = _error_of(response)
        if response.status_code == 401:
            raise Unauthorized(self.url, message)
        raise ApiError(response.status_code, type_, message)


def _error_of(response: httpx.Response) -> tuple[str, str]:
    """The daemon's `{"error": {"type", "message"}}`, or a description of whatever else came back."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error.get("type") or "error"), error["message"]
    return "http_error", f"the daemon answered {response.status_code} {response.reason_phrase}"


def _reason(exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.ConnectError):
        return "connection refused"
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    return str(exc) or type(exc).__name__
