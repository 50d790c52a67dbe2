"""The `http` runtime: any OpenAI- or Anthropic-compatible endpoint. Pass-through: the client's path and body go
upstream unchanged; reef's key is added to a request that carries no credential of its own; and a streamed chat
completion that does not ask for its usage asks for it (runtimes/stream_usage.py), once more without it where the
upstream refuses the option.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from reef_contract import MESSAGES_ROUTE, RuntimeStatus
from reef_daemon.errors import UpstreamFailed
from reef_daemon.runtimes.base import Runtime, RuntimeResponse
from reef_daemon.runtimes.http_client import HttpClient, Origin, UpstreamError, UpstreamResponse
from reef_daemon.runtimes.stream_usage import REFUSAL_STATUSES, refuses_the_option, usage_asked
from reef_daemon.settings import Settings

log = logging.getLogger("reef.upstream")

ANTHROPIC_VERSION = "2023-06-01"


class HttpRuntimeResponse(RuntimeResponse):
    """An upstream's answer, bounded: at most `max_bytes` of body, and for an event stream an event (not a
    keep-alive comment) at least every `event_timeout_s`."""

    def __init__(self, response: UpstreamResponse, *, max_bytes: int, event_timeout_s: float) -> None:
        self._response = response
        self.status = response.status
        self.headers = response.headers
        self._max_bytes = max_bytes
        self._event_timeout_s = event_timeout_s

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        try:
            async for data in self._bounded("the upstream stream broke"):
                yield data
        except UpstreamError as exc:
            raise _failed(exc, f"the upstream stream broke: {exc}") from None

    async def read(self) -> bytes:
        try:
            return b"".join([data async for data in self._bounded("the upstream answer broke off")])
        except UpstreamError as exc:
            raise _failed(exc, f"the upstream answer broke off: {exc}") from None

    async def _bounded(self, broken: str) -> AsyncGenerator[bytes, None]:
        loop = asyncio.get_running_loop()
        events = self.is_event_stream
        received = 0
        last_event = loop.time()
        body = self._response.chunks()
        try:
            while True:
                try:
                    async with asyncio.timeout_at(last_event + self._event_timeout_s if events else None):
                        data = await anext(body)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise UpstreamFailed(
                        f"{broken}: no event within {self._event_timeout_s:g} s (inference.timeout-s), only "
                        "keep-alive comments",
                        type="upstream_timeout",
                    ) from None
                received += len(data)
                if received > self._max_bytes:
                    raise UpstreamFailed(
                        f"{broken}: the answer is larger than {self._max_bytes / 1024 / 1024:g} MiB "
                        "(inference.max-answer-mb)",
                        type="upstream_too_large",
                    )
                if events and b"data:" in data:
                    last_event = loop.time()
                yield data
        finally:
            await body.aclose()

    def body_at_hand(self) -> bool:
        return self._response.body_at_hand()

    async def close(self) -> None:
        self._response.release()


class _ReadAnswer(RuntimeResponse):
    """An upstream's answer whose body was read already (to see whether it refused `stream_options`)."""

    def __init__(self, answer: HttpRuntimeResponse, body: bytes) -> None:
        self._answer = answer
        self.status = answer.status
        self.headers = answer.headers
        self._body = body

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        yield self._body

    async def read(self) -> bytes:
        return self._body

    async def close(self) -> None:
        await self._answer.close()


class HttpRuntime(Runtime):
    kind = "http"
    answerer = "the upstream"

    def __init__(self, settings: Settings) -> None:
        self._client: HttpClient | None = None
        # Upstream URLs that refused `stream_options`: asked without it from then on, for the life of the process.
        self._refused_usage: set[str] = set()
        self.reconfigure(settings)

    def reconfigure(self, settings: Settings) -> None:
        if settings.inference.upstream_url is None:
            raise ValueError("the http runtime needs inference.upstream-url")
        self.url = settings.inference.upstream_url
        self._origin = Origin.parse(self.url)
        self.model = settings.inference.upstream_model
        # No total limit (a long stream is fine); connecting, every read and a stream's wait for its next event
        # each get timeout-s.
        self.timeout_s = settings.inference.timeout_s
        self.max_answer_bytes = int(settings.inference.max_answer_mb * 1024 * 1024)
        self._api_key = settings.inference.upstream_api_key

    async def start(self) -> None:
        self._client = HttpClient()

    async def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def describe(self) -> RuntimeStatus:
        return {"kind": self.kind, "model": self.model, "url": self.url}

    async def send(
        self,
        route: str,
        body: bytes,
        payload: dict[str, Any],
        headers: Mapping[str, str],
        *,
        scenario: str | None = None,  # an upstream serves every scenario alike
    ) -> RuntimeResponse:
        if self._client is None:
            raise RuntimeError("the http runtime is not started")
        outgoing = dict(headers)
        if self._api_key and not any(name.lower() in ("authorization", "x-api-key") for name in outgoing):
            if route.startswith(MESSAGES_ROUTE):
                outgoing["x-api-key"] = self._api_key
                outgoing.setdefault("anthropic-version", ANTHROPIC_VERSION)
            else:
                outgoing["Authorization"] = f"Bearer {self._api_key}"
        # Reef records what it relays, so it asks for plain bodies; an upstream that compresses anyway is decoded.
        outgoing["Accept-Encoding"] = "identity"
        asking = None if self.url in self._refused_usage else usage_asked(route, body, payload)
        if asking is None:
            return await self._post(route, outgoing, body)
        answer = await self._post(route, outgoing, asking)
        if answer.status not in REFUSAL_STATUSES:
            answer.usage_asked = True
            return answer
        try:
            refusal = await answer.read()
        except BaseException:
            await answer.close()
            raise
        if not refuses_the_option(answer.status, refusal):
            return _ReadAnswer(answer, refusal)
        await answer.close()
        log.warning(
            "the upstream at %s refuses stream_options: its chat streams are recorded without token counts unless "
            "their client asks for usage",
            self.url,
        )
        self._refused_usage.add(self.url)
        return await self._post(route, outgoing, body)

    async def _post(self, route: str, headers: Mapping[str, str], body: bytes) -> HttpRuntimeResponse:
        assert self._client is not None
        try:
            response = await self._client.post(
                self._origin, route, headers, body, connect_timeout_s=self.timeout_s, read_timeout_s=self.timeout_s
            )
        except UpstreamError as exc:
            if exc.timed_out:
                raise UpstreamFailed(
                    f"the upstream at {self.url} did not answer within {self.timeout_s:g} s", type="upstream_timeout"
                ) from None
            raise UpstreamFailed(
                f"cannot reach the upstream at {self.url}: {exc}", type="upstream_unreachable"
            ) from None
        return HttpRuntimeResponse(response, max_bytes=self.max_answer_bytes, event_timeout_s=self.timeout_s)


def _failed(exc: UpstreamError, broken: str) -> UpstreamFailed:
    """An answer that broke after its head: a wait that ran out, or anything else."""
    if exc.timed_out:
        return UpstreamFailed(str(exc), type="upstream_timeout")
    return UpstreamFailed(broken, type="upstream_broken")
