"""`GET /reef/events`: committed events as server-sent events, resumable with `Last-Event-ID`."""

from __future__ import annotations

import asyncio

from aiohttp import web

from reef_contract import EVENTS_ROUTE
from reef_daemon.context import DAEMON
from reef_daemon.errors import BadRequest
from reef_daemon.events import sse_frame
from reef_daemon.names import check_scenario_filter

routes = web.RouteTableDef()

KEEPALIVE_S = 15.0
REPLAY_PAGE = 1000
MAX_SEQUENCE = 2**63 - 1  # SQLite's largest integer


@routes.get(EVENTS_ROUTE)
async def stream_events(request: web.Request) -> web.StreamResponse:
    daemon = request.app[DAEMON]
    scenario = request.query.get("scenario") or None
    if scenario is not None:
        check_scenario_filter(scenario)
    resume = request.headers.get("Last-Event-ID") or request.query.get("after")
    try:
        last = int(resume) if resume else None
    except ValueError:
        last = -1
    # Checked before the stream starts: an error after that could not be an HTTP error any more.
    if last is not None and not 0 <= last <= MAX_SEQUENCE:
        raise BadRequest("Last-Event-ID must be a sequence number", type="invalid_query")

    # Subscribe before replaying, so nothing committed in between is missed; duplicates are skipped by sequence.
    subscription = daemon.bus.subscribe(scenario)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"})
    try:
        await response.prepare(request)
        await response.write(b": connected\n\n")
        if last is not None:
            while True:
                replay = await daemon.store.events.after(last, scenario, REPLAY_PAGE)
                for past in replay:
                    await response.write(sse_frame(past))
                    last = past.sequence
                if len(replay) < REPLAY_PAGE:
                    break
        while True:
            try:
                async with asyncio.timeout(KEEPALIVE_S):
                    event = await subscription.next()
            except TimeoutError:
                await response.write(b": keep-alive\n\n")
                continue
            if event is None:  # dropped for falling behind, or shutting down: the client resumes
                break
            if last is not None and event.sequence <= last:
                continue
            await response.write(sse_frame(event))
            last = event.sequence
    except ConnectionError:
        pass  # the client went away (reset, broken pipe, aborted); it resumes with Last-Event-ID
    finally:
        subscription.close()
    return response
