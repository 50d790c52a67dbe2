"""`ReefClient`: the one HTTP client of the daemon API.

Every failure is one of three exceptions, each carrying a sentence a person can act on:
`DaemonUnreachable` (nothing answers at the URL), `Unauthorized` (the daemon wants a token) and `ApiError`
(the daemon refused the call; `type` and `message` are the daemon's own).
"""

from __future__ import annotations

import base64
import socket
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, NamedTuple
from urllib.parse import quote

import httpx
from httpx_sse import SSEError, connect_sse

from reef_client._events import Event, event_of
from reef_contract import (
    CANARY_ROUTE,
    CHAT_ROUTE,
    EVENTS_ROUTE,
    EXPORT_ROUTE,
    EXPORT_TOTAL_HEADER,
    HARNESS_ADAPTERS_ROUTE,
    HARNESS_ROUTE,
    HEALTH_ROUTE,
    INSTALL_ROUTE,
    RECEIPT_HEADER,
    RECORD_ROUTE,
    RECORDS_BATCH_ROUTE,
    RECORDS_ROUTE,
    RELEASE_FILES_ROUTE,
    RELEASES_ROUTE,
    REPORT_ROUTE,
    REQUEST_ROUTE,
    REQUESTS_ROUTE,
    SCENARIO_HEADER,
    SCENARIO_ROUTE,
    SCENARIO_UPDATE_ROUTE,
    SCENARIOS_ROUTE,
    SOURCE_ENABLE_ROUTE,
    SPEND_ROUTE,
    STATUS_ROUTE,
    TASK_DISMISS_ROUTE,
    TASK_PROMOTE_ROUTE,
    TASK_ROUTE,
    TASKS_ROUTE,
    VERSION_SCORES_ROUTE,
    AdapterList,
    AdapterRow,
    ArchiveAck,
    BatchAck,
    CanaryAnswer,
    CanaryEnded,
    CanaryState,
    EvalTask,
    HarnessFiles,
    Health,
    ImportConversation,
    RecordDetail,
    RecordPage,
    ReleaseFiles,
    ReleaseList,
    ReleaseRow,
    ReplayDismissed,
    ReportAck,
    ReportSource,
    RequestAck,
    RequestProgress,
    ScenarioInfo,
    ScenarioList,
    ScenarioRow,
    SourceEnabled,
    SpendAnswer,
    Status,
    TaskList,
    VersionScores,
)

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


class ChatReply(NamedTuple):
    """A chat completion's receipt (the record id to score) and its text."""

    receipt: str
    text: str


class ExportStream(NamedTuple):
    """An export under way: how many records it reads, and its JSON lines as they arrive (without newlines)."""

    total: int
    lines: Iterator[str]


def _export_lines(response: httpx.Response) -> Iterator[str]:
    try:
        yield from (line for line in response.iter_lines() if line)
    except httpx.RemoteProtocolError as exc:  # the daemon cut the body: the export failed part way
        raise ApiError(
            500, "export_broken", f"the export broke off before its end ({exc}); the daemon log says why"
        ) from None


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
        body: Health = self._call("GET", HEALTH_ROUTE)
        return bool(body.get("ok"))

    def status(self) -> Status:
        """Version, uptime, recipe, runtime, per-scenario counts and training state."""
        body: Status = self._call("GET", STATUS_ROUTE)
        return body

    def spend(self) -> SpendAnswer:
        """What each scenario's exchanges, and the judge's calls by the source that asked, cost."""
        body: SpendAnswer = self._call("GET", SPEND_ROUTE)
        return body

    # --- scenarios ------------------------------------------------------------------------------------------

    def scenarios(self) -> list[ScenarioRow]:
        """The active scenarios with their record, report and unscored counts."""
        body: ScenarioList = self._call("GET", SCENARIOS_ROUTE)
        return body["scenarios"]

    def create_scenario(self, name: str, training_mode: str | None = None) -> tuple[ScenarioInfo, bool]:
        """Create a scenario; returns it and whether it was new (False when it already existed)."""
        body: dict[str, Any] = {"name": name}
        if training_mode is not None:
            body["training_mode"] = training_mode
        response = self._send("POST", SCENARIOS_ROUTE, json=body)
        info: ScenarioInfo = response.json()
        return info, response.status_code == 201

    def move_scenario(self, name: str, recipe: str) -> ScenarioInfo:
        """Bind a scenario made under another recipe to the daemon's recipe `recipe`; returns it as moved."""
        path = SCENARIO_UPDATE_ROUTE.format(scenario=_segment(name))
        info: ScenarioInfo = self._call("POST", path, json={"recipe": recipe})
        return info

    def archive_scenario(self, name: str) -> str:
        """Archive a scenario (its records are kept under a new name); returns that name."""
        ack: ArchiveAck = self._call("DELETE", SCENARIO_ROUTE.format(scenario=_segment(name)))
        return str(ack["archived_as"])

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
        page: RecordPage = self._call("GET", RECORDS_ROUTE, params=params)
        return page

    def record(self, record_id: str) -> RecordDetail:
        """One record in full: request, response, timings, tokens, tags and the reports that reference it."""
        detail: RecordDetail = self._call("GET", RECORD_ROUTE.format(id=_segment(record_id)))
        return detail

    def report(
        self,
        scenario: str,
        references: list[str],
        *,
        score: float | None = None,
        feedback: str | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        agent_record_id: str | None = None,
        source: ReportSource | None = None,
        evidence: Mapping[str, Any] | None = None,
    ) -> ReportAck:
        """Send a score and/or feedback for receipts of one scenario. The same `agent_record_id` with the same
        content is a safe retry; with different content the daemon answers 409 (ApiError). A report derived with
        no person names its `source` and `evidence`; the daemon keeps one per record and source."""
        body: dict[str, Any] = {"references": references}
        for key, value in (("score", score), ("feedback", feedback), ("metadata", metadata),
                           ("agent_record_id", agent_record_id), ("source", source),
                           ("evidence", evidence)):  # fmt: skip
            if value is not None:
                body[key] = value
        ack: ReportAck = self._call("POST", REPORT_ROUTE, json=body, headers={SCENARIO_HEADER: scenario})
        return ack

    # --- inference ------------------------------------------------------------------------------------------

    def chat(self, scenario: str, messages: list[dict[str, Any]], **params: Any) -> ChatReply:
        """One chat completion through the proxy, as an agent would send it; returns the receipt and the text."""
        body = {"model": "reef", "messages": messages, **params}
        response = self._send("POST", CHAT_ROUTE, json=body, headers={SCENARIO_HEADER: scenario})
        try:
            text = response.json()["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            raise ApiError(response.status_code, "invalid_response", "the chat completion had no message") from None
        return ChatReply(response.headers.get(RECEIPT_HEADER, ""), str(text))

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
                with connect_sse(
                    self._http, "GET", EVENTS_ROUTE, params=params, headers=headers, timeout=timeout
                ) as source:
                    if source.response.status_code >= 400:
                        source.response.read()
                        self._raise_for(source.response)
                    for sse in source.iter_sse():
                        event = event_of(sse)
                        if event is not None:
                            last = event.sequence
                            yield event
            except httpx.TransportError as exc:
                raise DaemonUnreachable(self.url, _reason(exc)) from None
            except SSEError:
                raise ApiError(
                    200, "invalid_response", f"{self.url}{EVENTS_ROUTE} sent no event stream; is it a reef daemon?"
                ) from None
            if last == resumed_from:  # closed before anything new arrived: do not spin on reconnects
                time.sleep(RECONNECT_PAUSE_S)

    # --- harness (reefine) ----------------------------------------------------------------------------------

    def file_request(self, scenario: str, text: str, *, session: str | None = None) -> RequestAck:
        """File a change request for a scenario's harness; returns its id and progress path (202 = queued)."""
        body: dict[str, Any] = {"text": text}
        if session is not None:
            body["session"] = session
        ack: RequestAck = self._call("POST", REQUESTS_ROUTE, json=body, headers={SCENARIO_HEADER: scenario})
        return ack

    def request_progress(self, request_id: str) -> RequestProgress:
        """Where a change request stands: state, activity, design, and once settled its result and version."""
        progress: RequestProgress = self._call("GET", REQUEST_ROUTE.format(request_id=_segment(request_id)))
        return progress

    def releases(self, scenario: str) -> list[ReleaseRow]:
        """A scenario's versions, newest first, with result, pending and current flags and the request text."""
        body: ReleaseList = self._call("GET", RELEASES_ROUTE.format(scenario=_segment(scenario)))
        return body["releases"]

    def release_files(self, scenario: str, release_id: str) -> dict[str, bytes]:
        """A release's files in a layout other tools load (a LoRA adapter: PEFT's), by file name."""
        path = RELEASE_FILES_ROUTE.format(scenario=_segment(scenario), release_id=_segment(release_id))
        body: ReleaseFiles = self._call("GET", path)
        return {name: base64.b64decode(content) for name, content in body["files"].items()}

    def change_release(self, scenario: str, operation: str, release_id: str) -> ReleaseRow:
        """`promote` a pending release or `rollback` to an earlier one; returns the new head's release row."""
        path = f"{SCENARIO_ROUTE.format(scenario=_segment(scenario))}/{operation}"
        head: ReleaseRow = self._call("POST", path, json={"release_id": release_id})
        return head

    def harness(self, scenario: str, release_id: str | None = None) -> HarnessFiles:
        """A release's harness files (the served one by default), with its version and parent release."""
        params = {"release_id": release_id} if release_id else {}
        body: HarnessFiles = self._call("GET", HARNESS_ROUTE, params=params, headers={SCENARIO_HEADER: scenario})
        return body

    def adapters(self) -> list[AdapterRow]:
        """The agents a harness can be installed for (pi, codex, dsh, claude, opencode) and what each renders."""
        body: AdapterList = self._call("GET", HARNESS_ADAPTERS_ROUTE)
        return body["adapters"]

    def install_script(self, scenario: str, adapter: str, release_id: str | None = None) -> str:
        """The POSIX sh script that installs a scenario's harness release for `adapter`."""
        params = {"adapter": adapter, **({"release_id": release_id} if release_id else {})}
        response = self._send("GET", INSTALL_ROUTE, params=params, headers={SCENARIO_HEADER: scenario})
        return response.text

    # --- live evidence: per-version scores and canaries ---------------------------------------------------

    def version_scores(self, scenario: str) -> VersionScores:
        """Per harness release, how the real sessions it served scored, and the running canary."""
        body: VersionScores = self._call("GET", VERSION_SCORES_ROUTE.format(scenario=_segment(scenario)))
        return body

    def canary(self, scenario: str) -> CanaryState | None:
        """The scenario's running canary, None when none runs."""
        body: CanaryAnswer = self._call("GET", CANARY_ROUTE.format(scenario=_segment(scenario)))
        return body["canary"]

    def start_canary(self, scenario: str, release_id: str, share: float) -> CanaryState:
        """Serve `release_id` to `share` percent of new sessions, beside the served release."""
        path = CANARY_ROUTE.format(scenario=_segment(scenario))
        body: CanaryAnswer = self._call("POST", path, json={"release_id": release_id, "share": share})
        if body["canary"] is None:
            raise ApiError(500, "invalid_response", "the daemon started no canary")
        return body["canary"]

    def end_canary(self, scenario: str) -> CanaryEnded:
        """End the scenario's canary: every new session runs the served release again."""
        ended: CanaryEnded = self._call("DELETE", CANARY_ROUTE.format(scenario=_segment(scenario)))
        return ended

    def enable_source(self, scenario: str, source: str) -> SourceEnabled:
        """Count a derived source's scores in the scenario again after its agreement with people switched it off."""
        path = SOURCE_ENABLE_ROUTE.format(scenario=_segment(scenario), source=_segment(source))
        enabled: SourceEnabled = self._call("POST", path)
        return enabled

    # --- records in and out --------------------------------------------------------------------------------

    def import_batch(self, scenario: str, conversations: Sequence[ImportConversation]) -> BatchAck:
        """Import conversations into a scenario; per conversation: imported, duplicate (already stored) or refused
        (with the reason). At most MAX_BATCH of the contract per call."""
        body = {"records": list(conversations)}
        ack: BatchAck = self._call("POST", RECORDS_BATCH_ROUTE, json=body, headers={SCENARIO_HEADER: scenario})
        return ack

    @contextmanager
    def export(
        self,
        scenario: str,
        *,
        format: str = "openai",
        min_score: float | None = None,
        since: str | None = None,
        include_cut: bool = False,
    ) -> Iterator[ExportStream]:
        """A scenario's records as JSON lines in `format` (openai, preference, tokens), streamed; `since` is a
        date, an ISO 8601 time or epoch seconds; `include_cut` adds answers cut before their end. A body that
        breaks off before its end is an ApiError (`export_broken`), never a short export."""
        params = {"scenario": scenario, "format": format}
        if min_score is not None:
            params["min_score"] = repr(min_score)
        if since is not None:
            params["since"] = since
        if include_cut:
            params["include_cut"] = "true"
        timeout = httpx.Timeout(DEFAULT_TIMEOUT_S, read=None)  # a large preference export reads before it writes
        try:
            with self._http.stream("GET", EXPORT_ROUTE, params=params, timeout=timeout) as response:
                if response.status_code >= 400:
                    response.read()
                    self._raise_for(response)
                total = int(response.headers.get(EXPORT_TOTAL_HEADER) or 0)
                yield ExportStream(total, _export_lines(response))
        except httpx.TransportError as exc:
            raise DaemonUnreachable(self.url, _reason(exc)) from None

    # --- evaluation tasks -----------------------------------------------------------------------------------

    def tasks(self, scenario: str) -> TaskList:
        """A scenario's stored tasks (oldest first, every page of them) and its current replays (newest first)."""
        path = TASKS_ROUTE.format(scenario=_segment(scenario))
        body: TaskList = self._call("GET", path)
        while body["next_after"] is not None:
            page: TaskList = self._call("GET", path, params={"after": body["next_after"]})
            body = {**page, "tasks": body["tasks"] + page["tasks"]}
        return body

    def add_task(
        self,
        scenario: str,
        prompt: str,
        *,
        fixture: Mapping[str, str] | None = None,
        regex: str | None = None,
        judge: str | None = None,
        protected: bool = False,
    ) -> EvalTask:
        """Store an evaluation task; returns it with its id. A bad field is an ApiError that names it."""
        body: dict[str, Any] = {"prompt": prompt, "fixture": dict(fixture or {}), "protected": protected}
        if regex is not None:
            body["regex"] = regex
        if judge is not None:
            body["judge"] = judge
        task: EvalTask = self._call("POST", TASKS_ROUTE.format(scenario=_segment(scenario)), json=body)
        return task

    def task(self, scenario: str, task_id: str) -> EvalTask:
        """One stored task, or a replay still offered."""
        task: EvalTask = self._call("GET", _task_path(TASK_ROUTE, scenario, task_id))
        return task

    def remove_task(self, scenario: str, task_id: str) -> EvalTask:
        """Delete a stored task; returns what it was."""
        task: EvalTask = self._call("DELETE", _task_path(TASK_ROUTE, scenario, task_id))
        return task

    def promote_replay(self, scenario: str, replay_id: str) -> EvalTask:
        """Make a replay a protected task; returns the new task."""
        task: EvalTask = self._call("POST", _task_path(TASK_PROMOTE_ROUTE, scenario, replay_id))
        return task

    def dismiss_replay(self, scenario: str, replay_id: str) -> ReplayDismissed:
        """Stop offering a replay (and other conversations that opened with the same words)."""
        ack: ReplayDismissed = self._call("POST", _task_path(TASK_DISMISS_ROUTE, scenario, replay_id))
        return ack

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


def _task_path(route: str, scenario: str, task_id: str) -> str:
    return route.format(scenario=_segment(scenario), task=_segment(task_id))


def _segment(value: str) -> str:
    """A value as one path segment of a route."""
    return quote(value, safe="")


def _reason(exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.ConnectError):
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, socket.gaierror):
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            return f"the host name does not resolve: {cause.strerror or cause}"
        return "connection refused"
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    return str(exc) or type(exc).__name__
