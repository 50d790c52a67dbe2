"""Live evidence: `GET /reef/scenarios/{s}/versions/scores` (per-version scores of real sessions) and
`GET/POST/DELETE /reef/scenarios/{s}/canary` (a release served to a share of new sessions)."""

from __future__ import annotations

from aiohttp import web

from reef_contract import CANARY_ROUTE, VERSION_SCORES_ROUTE, CanaryAnswer, CanaryEnded
from reef_daemon.context import DAEMON
from reef_daemon.errors import BadRequest
from reef_daemon.harness.canary import checked_share, start_canary, version_scores
from reef_daemon.jsonbody import json_response, read_json_object
from reef_daemon.names import check_scenario_name

routes = web.RouteTableDef()

ENDED_BY_PERSON = "ended by a person"


def _scenario(request: web.Request) -> str:
    daemon = request.app[DAEMON]
    return daemon.store.scenarios.require(check_scenario_name(request.match_info["scenario"])).name


@routes.get(VERSION_SCORES_ROUTE)
async def get_version_scores(request: web.Request) -> web.Response:
    return json_response(await version_scores(request.app[DAEMON], _scenario(request)))


@routes.get(CANARY_ROUTE)
async def get_canary(request: web.Request) -> web.Response:
    scenario = _scenario(request)
    body: CanaryAnswer = {"scenario": scenario, "canary": await request.app[DAEMON].store.canaries.get(scenario)}
    return json_response(body)


@routes.post(CANARY_ROUTE)
async def post_canary(request: web.Request) -> web.Response:
    scenario = _scenario(request)
    body = await read_json_object(request)
    release_id, share = body.get("release_id"), body.get("share")
    if not isinstance(release_id, str) or not release_id.strip():
        raise BadRequest(
            'send {"release_id": "...", "share": 20} naming a release of this scenario', type="invalid_release"
        )
    state = await start_canary(request.app[DAEMON], scenario, release_id.strip(), checked_share(share))
    answer: CanaryAnswer = {"scenario": scenario, "canary": state}
    return json_response(answer)


@routes.delete(CANARY_ROUTE)
async def delete_canary(request: web.Request) -> web.Response:
    scenario = _scenario(request)
    ended = await request.app[DAEMON].store.canaries.end(scenario, "ended", ENDED_BY_PERSON)
    body: CanaryEnded = {"scenario": scenario, "ended": ended, "reason": ENDED_BY_PERSON}
    return json_response(body)
