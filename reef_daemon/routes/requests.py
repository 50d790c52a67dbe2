"""`GET /reef/requests/{id}`: where a change request stands. The committed step that consumed it settles it; a
settled one carries the evaluation gate's evidence (None when its step ran no gate)."""

from __future__ import annotations

from aiohttp import web

from reef_daemon.context import DAEMON
from reef_daemon.contract import REQUEST_ROUTE, RequestProgress, StepRow
from reef_daemon.errors import NotFound
from reef_daemon.harness.access import harness_recipe
from reef_daemon.jsonbody import json_response
from reef_daemon.store import Store

routes = web.RouteTableDef()


@routes.get(REQUEST_ROUTE)
async def get_request(request: web.Request) -> web.Response:
    daemon = request.app[DAEMON]
    progress = harness_recipe(daemon).progress
    request_id = request.match_info["request_id"]
    record = await daemon.store.records.get(request_id)
    if record["type"] != "train":
        raise NotFound(f"'{request_id}' is a {record['type']} record, not a change request", type="not_a_request")
    row = await progress.get(request_id)
    body: RequestProgress = {
        "id": request_id,
        "scenario": record["scenario"],
        "text": record.get("text"),
        "session": record.get("session"),
        "created_at": record["created_at"],
        "state": row["state"] if row else "queued",
        "activity": row["activity"] if row else [],
        "design": row["design"] if row else None,
    }
    outcome = (row or {}).get("outcome") or {}
    step = await _settling_step(daemon.store, record["scenario"], request_id)
    if step is not None:
        metrics = step["metrics"]
        body.update(
            {
                "state": "settled",
                "result": step["result"],
                "reason": metrics.get("reason") or metrics.get("error"),
                "release": step["release_id"],
                "version": step["version"],
                "how_to_use": metrics.get("how_to_use") or outcome.get("how_to_use"),
                "evidence": metrics.get("evidence"),
            }
        )
    return json_response(body)


async def _settling_step(store: Store, scenario: str, request_id: str) -> StepRow | None:
    number = (await store.steps.consumed_by([request_id])).get(request_id)
    if number is None:
        return None
    return next((step for step in await store.steps.history(scenario) if step["step"] == number), None)
