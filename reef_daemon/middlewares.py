"""Middlewares, outermost first: JSON errors and the overhead header, auth, the body limit."""

from __future__ import annotations

import contextlib
import logging
import time

from aiohttp import web
from aiohttp.typedefs import Handler

from reef_contract import HEALTH_ROUTE, INFERENCE_ROUTES, OVERHEAD_HEADER, STATUS_ROUTE, TOKEN_ENV, TOKEN_HEADER
from reef_daemon.auth import OPEN_PATHS
from reef_daemon.context import DAEMON
from reef_daemon.errors import PayloadTooLarge, ReefError, Unauthorized
from reef_daemon.jsonbody import json_response
from reef_daemon.proxy.handler import UPSTREAM_SECONDS
from reef_daemon.proxy.sse import error_frame

log = logging.getLogger("reef.http")
STARTED = web.RequestKey("reef.started_response", web.StreamResponse)

_HTTP_ERROR_TYPES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}


def _no_route(request: web.Request) -> str:
    """The 404 answer: where the routes are listed, and the usual slip of a client given an SDK's base URL."""
    said = f"no route {request.method} {request.path}"
    own = request.path.removeprefix("/v1")
    if own != request.path and (own == HEALTH_ROUTE or own.startswith(STATUS_ROUTE.rsplit("/", 1)[0] + "/")):
        said += f"; reef's own routes have no /v1 prefix: {own}"
    return f"{said}; docs/api.md lists the routes reef serves"


def _error_response(status: int, type_: str, message: str) -> web.Response:
    return json_response({"error": {"type": type_, "message": message}}, status=status)


async def remember_started(request: web.Request, response: web.StreamResponse) -> None:
    """`on_response_prepare`: the answer's status line is going out; an error after this cannot replace it."""
    request.setdefault(STARTED, response)


async def _end_started(request: web.Request, type_: str, message: str) -> web.StreamResponse:
    """A failure after the answer began: a second HTTP response inside the body would be garbage, so an event
    stream ends with an error frame its clients understand, any other body is cut short, and the connection
    closes."""
    response = request[STARTED]
    log.error("%s %s failed after its answer began: %s", request.method, request.path, message)
    if response.content_type == "text/event-stream":
        with contextlib.suppress(ConnectionError):
            await response.write(error_frame(request.path, type_, message))
    elif request.transport is not None:
        # Other bodies (an export's JSON lines) have no error frame: cut the connection before the last chunk, so
        # the client sees a broken body rather than a short one that looks whole.
        request.transport.abort()
    response.force_close()
    return response


@web.middleware
async def errors_and_overhead(request: web.Request, handler: Handler) -> web.StreamResponse:
    started = time.perf_counter()
    try:
        response = await handler(request)
    except ReefError as exc:
        if STARTED in request:
            return await _end_started(request, exc.type, exc.message)
        response = _error_response(exc.status, exc.type, exc.message)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        type_ = _HTTP_ERROR_TYPES.get(exc.status, "http_error")
        message = {
            404: _no_route(request),
            405: f"{request.method} is not allowed on {request.path}",
            413: "the request body is larger than the daemon accepts (reef.max-body-mb)",
        }.get(exc.status, exc.reason)
        response = _error_response(exc.status, type_, message)
    except ConnectionError:
        raise  # the client left; there is nobody to answer
    except Exception:
        log.exception("unexpected error on %s %s", request.method, request.path)
        message = "reef failed on this request; the daemon log says why"
        if STARTED in request:
            return await _end_started(request, "internal_error", message)
        response = _error_response(500, "internal_error", message)
    if response.status in (408, 413):
        response.force_close()  # the unread body must not be taken as the next request
    if not response.prepared and OVERHEAD_HEADER not in response.headers:
        upstream_s = request.get(UPSTREAM_SECONDS, 0.0)
        overhead_ms = max(0.0, (time.perf_counter() - started - upstream_s) * 1000)
        response.headers[OVERHEAD_HEADER] = f"{overhead_ms:.3f}"
    return response


@web.middleware
async def require_token(request: web.Request, handler: Handler) -> web.StreamResponse:
    gate = request.app[DAEMON].gate
    if request.path not in OPEN_PATHS and not gate.allows(request.headers, model_call=request.path in INFERENCE_ROUTES):
        raise Unauthorized(
            f"this daemon needs a token: send Authorization: Bearer <token> (or x-api-key, or {TOKEN_HEADER} to keep "
            f"Authorization for your own login), e.g. set {TOKEN_ENV}",
            type="unauthorized",
        )
    return await handler(request)


@web.middleware
async def limit_body(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse a body over the limit from its Content-Length, before reading it."""
    limit = request.app[DAEMON].settings.reef.max_body_mb * 1024 * 1024
    length = request.content_length
    if length is not None and length > limit:
        raise PayloadTooLarge(
            f"the request body is {length} bytes, over the {limit / 1024 / 1024:g} MiB limit (reef.max-body-mb)"
        )
    return await handler(request)
