"""`POST /reef/judge/group`: a judge ranks several answers to one prompt against each other, in one call, and each
answer gets a `judge` report with its relative score (GRPO's reward where no person scores the rollouts)."""

from __future__ import annotations

from aiohttp import web

from reef_contract import JUDGE_GROUP_ROUTE, MAX_GROUP, SCENARIO_HEADER
from reef_daemon.context import DAEMON
from reef_daemon.errors import BadRequest, Conflict
from reef_daemon.jsonbody import json_response, read_json_object
from reef_daemon.names import scenario_from_header
from reef_daemon.reports.group import judge_group as judge_group_records

routes = web.RouteTableDef()


@routes.post(JUDGE_GROUP_ROUTE)
async def judge_group(request: web.Request) -> web.Response:
    """Rank 2 to 8 answers to the same prompt against each other with the deployment's judge; each gets a `judge`
    report (one per record: a record judged before keeps its report). A judge with no usable ranking stores none; a
    409 when the judge would be the served model and that model is the policy the deployment trains."""
    daemon = request.app[DAEMON]
    scenario = daemon.store.scenarios.require(scenario_from_header(request.headers.get(SCENARIO_HEADER))).name
    body = await read_json_object(request)
    references = body.get("references")
    if (
        not isinstance(references, list)
        or not all(isinstance(ref, str) for ref in references)
        or not 2 <= len(set(references)) == len(references) <= MAX_GROUP
    ):
        raise BadRequest(f"references: 2 to {MAX_GROUP} different receipts of answers to one prompt", type="bad_group")
    records = [await daemon.store.records.get(ref) for ref in references]
    for record in records:
        if record["scenario"] != scenario or record["type"] != "inference" or record.get("answer") is None:
            raise BadRequest(
                f"references: '{record['id']}' is not an answered exchange of {scenario}", type="bad_group"
            )
    if daemon.judge is None:
        raise RuntimeError("the judge is not started")
    judge, settings = daemon.judge, daemon.settings.reports
    if judge.refused is not None:
        raise Conflict(judge.refused, type="self_judging")
    answer = await judge_group_records(daemon.store, judge, settings, scenario, records)
    return json_response(answer)
