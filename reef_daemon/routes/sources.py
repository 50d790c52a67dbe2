"""`POST /reef/scenarios/{s}/sources/{source}/enable`: count a derived source in a scenario again."""

from __future__ import annotations

from aiohttp import web

from reef_contract import PERSON_SOURCE, REPORT_SOURCES, SOURCE_ENABLE_ROUTE, SourceEnabled
from reef_daemon.context import DAEMON
from reef_daemon.errors import BadRequest
from reef_daemon.jsonbody import json_response
from reef_daemon.names import check_scenario_name

routes = web.RouteTableDef()


@routes.post(SOURCE_ENABLE_ROUTE)
async def enable_source(request: web.Request) -> web.Response:
    """Count the source's scores in the scenario again (training, live scores, canaries, the gate's tasks) after its
    agreement with people's scores switched it off; it is never switched off again by itself there."""
    daemon = request.app[DAEMON]
    scenario = daemon.store.scenarios.require(check_scenario_name(request.match_info["scenario"])).name
    source = request.match_info["source"]
    derived = [known for known in REPORT_SOURCES if known != PERSON_SOURCE]
    if source not in derived:
        raise BadRequest(f"source '{source[:40]}' is not a derived source; name one of {', '.join(derived)}",
                         type="bad_source")  # fmt: skip
    agreement = await daemon.store.trust.enable(scenario, source)
    body: SourceEnabled = {"scenario": scenario, "source": source, "agreement": agreement}
    return json_response(body)
