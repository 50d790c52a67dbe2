"""The inference routes: forward to the runtime, relay the answer, store the record, hand out the receipt.

Non-streaming answers get the receipt in `x-reef-agent-record-id` after the record is committed. Streams are
relayed frame by frame as they arrive; at the terminal frame the record is committed, then the receipt goes
out inside the stream. A stream that breaks still leaves a record (`complete: false`) and sends no receipt.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from reef_contract import NEW_SCENARIO_HEADER, OVERHEAD_HEADER, RECEIPT_HEADER, SCENARIO_HEADER
from reef_daemon.context import DAEMON, Daemon
from reef_daemon.errors import ReefError, StoreError, UpstreamFailed
from reef_daemon.ids import new_record_id
from reef_daemon.jsonbody import parse_json_body, read_body
from reef_daemon.names import scenario_from_header
from reef_daemon.proxy.client_auth import forwards_client_auth
from reef_daemon.proxy.headers import client_headers, tags_from, upstream_headers
from reef_daemon.proxy.sse import SseRelay, error_frame
from reef_daemon.records import InferenceDraft
from reef_daemon.runtimes.base import RuntimeResponse

log = logging.getLogger("reef.proxy")

UPSTREAM_SECONDS = web.RequestKey("reef.upstream_s", float)
# Upstream 4xx statuses an agent can act on are relayed as they are; other 4xx become 400, 5xx become 502.
_RELAYED_4XX = frozenset({400, 401, 403, 404, 408, 409, 422, 429})


def relayed_status(status: int) -> int:
    if status >= 500:
        return 502
    if status >= 400:
        return status if status in _RELAYED_4XX else 400
    return status


@dataclass
class Exchange:
    """One inference request in flight: what it asked, and the clock."""

    daemon: Daemon
    request: web.Request
    scenario: str
    body: bytes
    payload: dict[str, Any]
    tags: dict[str, str]
    made_scenario: str | None = None  # a new scenario named like an existing one, said in NEW_SCENARIO_HEADER
    started: float = field(default_factory=time.perf_counter)
    created_at: float = field(default_factory=time.time)
    upstream_s: float = 0.0
    ttft_ms: float | None = None
    stored: bool = False

    @property
    def route(self) -> str:
        return self.request.path

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000

    def overhead_ms(self) -> float:
        return max(0.0, self.elapsed_ms() - self.upstream_s * 1000)

    def add_headers(self, response: web.StreamResponse) -> None:
        """What reef answers on every response of this exchange: its overhead, and a scenario it made."""
        response.headers[OVERHEAD_HEADER] = f"{self.overhead_ms():.3f}"
        if self.made_scenario is not None:
            response.headers[NEW_SCENARIO_HEADER] = self.made_scenario

    def mark_first_byte(self) -> None:
        if self.ttft_ms is None:
            self.ttft_ms = self.elapsed_ms()

    async def store(
        self,
        *,
        status: int,
        response: bytes,
        stream: bool,
        complete: bool,
        error: str | None,
        answer: RuntimeResponse | None = None,
    ) -> str:
        """Commit the record; returns its id, the receipt."""
        self.request[UPSTREAM_SECONDS] = self.upstream_s
        model = self.payload.get("model")
        draft = InferenceDraft(
            id=new_record_id(),
            scenario=self.scenario,
            route=self.route,
            created_at=self.created_at,
            model=model if isinstance(model, str) else None,
            request=self.body,
            status=status,
            response=response,
            stream=stream,
            complete=complete,
            error=error,
            ttft_ms=self.ttft_ms,
            duration_ms=self.elapsed_ms(),
            overhead_ms=self.overhead_ms(),
            tags=self.tags,
            release=answer.release() if answer is not None else None,
            tokens=answer.token_data() if answer is not None else None,
            payload=self.payload,
        )
        self.stored = True
        try:
            # Queued at once: a client that leaves (or a shutdown) cancels only this wait, never the write.
            row = await self.daemon.store.records.enqueue_inference(draft)
        except StoreError:
            log.error("could not store a record for scenario %s", self.scenario)
            raise
        return str(row["id"])


async def handle_inference(request: web.Request) -> web.StreamResponse:
    daemon = request.app[DAEMON]
    forwarded = forwards_client_auth(request.headers, daemon.gate, daemon.settings.inference)
    scenario = scenario_from_header(request.headers.get(SCENARIO_HEADER))
    body = await read_body(request)
    payload = await parse_json_body(body)
    tags = tags_from(request.headers)
    made = daemon.unlike_a_new_name(scenario)
    if made is not None:
        log.warning("a request to %s %s", request.path, made)
    await daemon.ensure_scenario(scenario)
    exchange = Exchange(daemon, request, scenario, body, payload, tags, made)
    headers = upstream_headers(request.headers, pass_client_auth=forwarded)

    sent = time.perf_counter()
    try:
        answer = await daemon.runtime.send(exchange.route, body, payload, headers, scenario=scenario)
    except UpstreamFailed as exc:
        exchange.upstream_s += time.perf_counter() - sent
        await exchange.store(
            status=exc.status, response=json.dumps(exc.to_json()).encode(), stream=False, complete=False,
            error=exc.message,
        )  # fmt: skip
        raise
    except asyncio.CancelledError:
        await _store_abandoned(exchange, answer=None)
        raise
    exchange.upstream_s += time.perf_counter() - sent
    try:
        if answer.status >= 400:
            return await _relay_error(exchange, answer)
        if payload.get("stream") is True and answer.is_event_stream:
            return await _relay_stream(exchange, answer)
        return await _relay_buffered(exchange, answer)
    except asyncio.CancelledError:
        await _store_abandoned(exchange, answer)
        raise
    finally:
        await answer.close()


async def _store_abandoned(exchange: Exchange, answer: RuntimeResponse | None) -> None:
    """The request was cancelled (the client left) before its record was stored: store what is known."""
    if exchange.stored:
        return
    status = answer.status if answer is not None else 499
    await exchange.store(
        status=status, response=b"", stream=exchange.payload.get("stream") is True, complete=False,
        error="client disconnected", answer=answer,
    )  # fmt: skip


async def _read_timed(exchange: Exchange, answer: RuntimeResponse) -> bytes:
    began = time.perf_counter()
    try:
        return await answer.read()
    finally:
        exchange.upstream_s += time.perf_counter() - began


async def _relay_error(exchange: Exchange, answer: RuntimeResponse) -> web.Response:
    try:
        body = await _read_timed(exchange, answer)
    except UpstreamFailed as exc:
        body = json.dumps(exc.to_json()).encode()
    await exchange.store(
        status=answer.status, response=body, stream=False, complete=True,
        error=_error_text(exchange.daemon.runtime.answerer, answer.status, body), answer=answer,
    )  # fmt: skip
    response = web.Response(status=relayed_status(answer.status), body=body, headers=client_headers(answer.headers))
    exchange.add_headers(response)
    return response


def _error_text(answerer: str, status: int, body: bytes) -> str:
    """What a record says of an error answer: who answered, the status, and the answer's own message if it has one."""
    text = f"{answerer} answered {status}"
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return text
    message = error.get("message") if isinstance(error, dict) else None
    return f"{text}: {message}" if isinstance(message, str) and message else text


async def _relay_buffered(exchange: Exchange, answer: RuntimeResponse) -> web.Response:
    try:
        body = await _read_timed(exchange, answer)
    except UpstreamFailed as exc:
        await exchange.store(
            status=exc.status, response=b"", stream=False, complete=False, error=exc.message, answer=answer
        )
        raise
    # A client that left will read neither the answer nor its receipt: the record says so.
    gone = _client_gone(exchange.request)
    receipt = await exchange.store(
        status=answer.status, response=body, stream=False, complete=not gone,
        error="client disconnected" if gone else None, answer=answer,
    )  # fmt: skip
    response = web.Response(status=answer.status, body=body, headers=client_headers(answer.headers))
    if not gone:
        response.headers[RECEIPT_HEADER] = receipt
    exchange.add_headers(response)
    return response


class _HeadWithFirstBytes(web.StreamResponse):
    """A stream whose status line and headers go out in the same write as its first relayed bytes."""

    _send_headers_immediately = False  # aiohttp's switch: keep the head until the first body write


async def _relay_stream(exchange: Exchange, answer: RuntimeResponse) -> web.StreamResponse:
    # When the first bytes came with the head (or right behind it), they go out with it: one write, not two. When
    # they have not, the head goes out at once, so a client of a slow model sees the answer begin.
    kind = _HeadWithFirstBytes if answer.body_at_hand() else web.StreamResponse
    response = kind(status=answer.status, headers=client_headers(answer.headers))
    exchange.add_headers(response)
    relay = SseRelay(exchange.route, hide_usage=answer.usage_asked)
    received: list[bytes] = []
    error: ReefError | None = None
    client_gone = False
    chunks = answer.chunks()
    relays = exchange.daemon.relays
    task = asyncio.current_task()
    if task is not None:
        relays.add(task)
    try:
        await response.prepare(exchange.request)  # a client that already left fails here, and is recorded below
        while not relay.terminated:
            began = time.perf_counter()
            try:
                data = await anext(chunks)
            except StopAsyncIteration:
                break
            finally:
                exchange.upstream_s += time.perf_counter() - began
            received.append(data)
            forward = relay.feed(data)
            if forward:
                exchange.mark_first_byte()
                await response.write(forward)
            elif len(received) == 1 and not relay.terminated:
                await response.write(b"")  # no whole frame yet: the head goes out now, not with the next read
    except UpstreamFailed as exc:
        error = exc
    except ConnectionError:
        client_gone = True
    except asyncio.CancelledError:
        stopping = exchange.daemon.stopping
        reason = "reef shut down before the stream ended" if stopping else "client disconnected"
        await exchange.store(
            status=answer.status, response=b"".join(received), stream=True, complete=False, error=reason,
            answer=answer,
        )  # fmt: skip
        if stopping:  # the client is still there: tell it why its stream ends
            await _write_quietly(response, relay.remainder() + error_frame(exchange.route, "shutting_down", reason))
        raise
    finally:
        relays.discard(task)
        await chunks.aclose()

    raw = b"".join(received)
    client_gone = client_gone or _client_gone(exchange.request)  # one that left before any write is gone too
    if relay.terminated and not client_gone:
        try:
            receipt = await exchange.store(
                status=answer.status, response=raw, stream=True, complete=True, error=None, answer=answer
            )
        except StoreError as exc:  # the stream has begun: say so inside it, without a receipt, and end it
            await _write_quietly(response, error_frame(exchange.route, exc.type, exc.message))
            return response
        await _write_quietly(response, relay.finish(receipt))
        return response

    if client_gone:
        reason = "client disconnected"
    elif error is not None:
        reason = error.message
    else:
        reason = "upstream SSE ended without a terminal event"
    # A store failure here is logged by `store`; the client still hears why its stream broke.
    with contextlib.suppress(StoreError):
        await exchange.store(
            status=answer.status, response=raw, stream=True, complete=False, error=reason, answer=answer
        )
    if not client_gone:
        ending = relay.remainder() + error_frame(exchange.route, error.type if error else "upstream_incomplete", reason)
        await _write_quietly(response, ending)
    return response


def _client_gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


async def _write_quietly(response: web.StreamResponse, data: bytes) -> None:
    """Write the last bytes of a stream; a client that left by now is not an error worth raising."""
    try:
        await response.write_eof(data)  # the last chunk and the end of the body in one write
    except ConnectionError:
        log.info("client left before the end of its stream")
