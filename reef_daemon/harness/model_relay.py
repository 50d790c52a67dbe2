"""What a jailed agent may ask of the daemon through its model socket: model calls (the inference routes) recorded in
the trial's own scenario, and nothing else, whatever the daemon's auth setting.

Each allowed request is relayed to the daemon as it came (body and answer streamed, bytes untouched), with the
scenario header set to the trial's (and the run's own tags, as `x-reef-tag-*` headers); a request for any other
route, or naming another scenario, is answered here
with a JSON error and never reaches the daemon, so it stores nothing. With a `Budget`, model calls past its limit
are answered 429 here. With a `token`, the relay presents it to the daemon itself, in place of whatever credential the
agent sent, so the agent needs none (and holds none it could use at the daemon's port). `routes` are served by the
socket itself before any relaying (the agent proposer's step tools,
which the daemon runs outside the jail).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from reef_contract import INFERENCE_ROUTES, SCENARIO_HEADER, TAG_HEADER_PREFIX
from reef_daemon.jsonbody import json_response
from reef_daemon.proxy.headers import HOP_BY_HOP

CHUNK = 65536
# Headers about one hop of the connection, not the request (the proxy's set, less the length, which a relayed
# body keeps, plus the host); the relay's own connections set their own.
_HOP_BY_HOP = (HOP_BY_HOP - {"content-length"}) | {"host"}
_CREDENTIALS = ("authorization", "x-api-key")
_SESSION = web.AppKey("session", aiohttp.ClientSession)


@dataclass
class Budget:
    """How many model calls the socket relays (`limit`), and how many it has (`used`)."""

    limit: int
    used: int = 0


def relay_app(
    daemon_url: str,
    scenario: str,
    budget: Budget | None = None,
    routes: Iterable[web.RouteDef] = (),
    token: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> web.Application:
    """The socket's HTTP server: `routes`, and model calls of `scenario` relayed to the daemon at `daemon_url`, each
    tagged with `tags` (name to value) over whatever tags of those names the agent sent."""
    forced = {f"{TAG_HEADER_PREFIX}{name}": value for name, value in (tags or {}).items()}
    forced[SCENARIO_HEADER] = scenario

    async def relay(request: web.Request) -> web.StreamResponse:
        if request.path not in INFERENCE_ROUTES:
            routes = ", ".join(INFERENCE_ROUTES)
            return _refuse(404, "not_found", f"the model socket serves only model calls ({routes})")
        if request.method != "POST":
            return _refuse(405, "method_not_allowed", f"{request.method} is not allowed on {request.path}")
        named = {value.strip() for value in request.headers.getall(SCENARIO_HEADER, [])}
        if named - {scenario}:
            return _refuse(403, "forbidden", f"the model socket serves model calls of scenario {scenario} only")
        if budget is not None:
            if budget.used >= budget.limit:
                return _refuse(429, "budget_spent", f"this run may make {budget.limit} model calls; all are spent")
            budget.used += 1
        headers = [(key, value) for key, value in request.headers.items() if _relayed(key)]
        headers = [(key, value) for key, value in headers if key.lower() not in forced]
        headers += list(forced.items())
        if token is not None:
            headers = [(key, value) for key, value in headers if key.lower() not in _CREDENTIALS]
            headers.append(("Authorization", f"Bearer {token}"))
        try:
            answer = await request.app[_SESSION].post(request.path, headers=headers, data=request.content)
        except (aiohttp.ClientError, TimeoutError) as exc:
            return _refuse(502, "upstream_failed", f"the daemon could not be reached through the model socket: {exc}")
        async with answer:  # once the answer has begun, a failure ends the connection instead (see _answer)
            return await _answer(request, answer)

    async def session(app: web.Application) -> AsyncIterator[None]:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        skip = ("Accept-Encoding", "User-Agent", "Content-Type")  # only what the agent sent
        async with aiohttp.ClientSession(
            daemon_url, timeout=timeout, auto_decompress=False, skip_auto_headers=skip
        ) as client:
            app[_SESSION] = client
            yield

    app = web.Application()
    app.router.add_routes(routes)
    app.router.add_route("*", "/{path:.*}", relay)
    app.cleanup_ctx.append(session)
    return app


async def _answer(request: web.Request, answer: aiohttp.ClientResponse) -> web.StreamResponse:
    """The daemon's answer, streamed back to the agent as it comes."""
    response = web.StreamResponse(status=answer.status, reason=answer.reason)
    for key, value in answer.headers.items():
        if _relayed(key) and key.lower() != "content-length":
            response.headers.add(key, value)
    if answer.content_length is not None:
        response.content_length = answer.content_length
    await response.prepare(request)
    try:
        async for chunk in answer.content.iter_chunked(CHUNK):
            await response.write(chunk)
    except ConnectionResetError:  # the agent left: drop the daemon's connection too, so it records that
        answer.close()
        raise
    except (aiohttp.ClientError, TimeoutError):  # the daemon's side broke off: so does the agent's
        response.force_close()
        return response
    await response.write_eof()
    return response


def _relayed(header: str) -> bool:
    return header.lower() not in _HOP_BY_HOP


def _refuse(status: int, type_: str, message: str) -> web.Response:
    return json_response({"error": {"type": type_, "message": message}}, status=status)
