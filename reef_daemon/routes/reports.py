"""`POST /reef/report`: a score and/or feedback for inference receipts."""

from __future__ import annotations

import time

from aiohttp import web

from reef_contract import PERSON_SOURCE, REPORT_ROUTE, SCENARIO_HEADER, ReportAck
from reef_daemon.context import DAEMON
from reef_daemon.ids import new_record_id
from reef_daemon.jsonbody import json_response, read_json_object
from reef_daemon.names import scenario_from_header
from reef_daemon.records import ClientRecordDraft
from reef_daemon.reports import content_hash, report_source_of

routes = web.RouteTableDef()


@routes.post(REPORT_ROUTE)
async def post_report(request: web.Request) -> web.Response:
    daemon = request.app[DAEMON]
    scenario = scenario_from_header(request.headers.get(SCENARIO_HEADER))
    body = await read_json_object(request)
    content = daemon.reports.validate(body)
    report_id = body.get("agent_record_id") or new_record_id()
    source = report_source_of(body)
    # A person's report hashes as it always did, so a retry of one stored before sources existed is still a retry.
    digest = content_hash(scenario, content if source == PERSON_SOURCE else {**content, "source": source})
    draft = ClientRecordDraft(report_id, scenario, "report", time.time(), content, digest, source)
    # A scenario seen first in a report is created with it, so a refused report creates none.
    row, created = await daemon.store.scenarios.ensure_with(
        scenario,
        daemon.recipe.name,
        daemon.recipe.default_training_mode,
        lambda ctx: daemon.store.records.insert_client_record(ctx, draft),
    )
    ack: ReportAck = {"agent_record_id": row["id"], "scenario": scenario, "request_type": "report", "created": created}
    return json_response(ack)
