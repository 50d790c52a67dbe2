"""Records: pages of rows with filters, and one record in full with the reports that reference it."""

from __future__ import annotations

from aiohttp import web

from reef_contract import (
    RECORD_ROUTE,
    RECORD_TYPES,
    RECORDS_ROUTE,
    JudgedRecord,
    RecordDetail,
    RecordPage,
    StoredRecord,
    record_type,
)
from reef_daemon.context import DAEMON
from reef_daemon.errors import BadRequest
from reef_daemon.jsonbody import json_response
from reef_daemon.names import check_scenario_filter
from reef_daemon.store import RecordQuery
from reef_daemon.store.records import MAX_PAGE

routes = web.RouteTableDef()


def _int_param(request: web.Request, name: str, low: int, high: int) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a whole number", type="invalid_query") from None
    if not low <= value <= high:
        raise BadRequest(f"{name} must be from {low} to {high}", type="invalid_query")
    return value


@routes.get(RECORDS_ROUTE)
async def list_records(request: web.Request) -> web.Response:
    daemon = request.app[DAEMON]
    scenario = request.query.get("scenario") or None
    if scenario is not None:
        check_scenario_filter(scenario)
    named = request.query.get("type") or None
    type_ = None if named is None else record_type(named)  # a type's old name (train) still filters
    if named is not None and type_ is None:
        raise BadRequest(f"type must be one of {', '.join(RECORD_TYPES)}", type="invalid_query")
    unscored = request.query.get("unscored", "").lower() in ("1", "true", "yes")
    after = _int_param(request, "after", 0, 2**62)
    before = _int_param(request, "before", 0, 2**62)
    if after is not None and before is not None:
        raise BadRequest("use after or before, not both", type="invalid_query")
    limit = _int_param(request, "limit", 1, MAX_PAGE) or 50
    query = RecordQuery(scenario, type_, unscored, after, before, limit)
    page: RecordPage = await daemon.store.records.list(query)
    return json_response(page, status=200)


@routes.get(RECORD_ROUTE)
async def show_record(request: web.Request) -> web.Response:
    daemon = request.app[DAEMON]
    record, reports = await daemon.store.records.get_with_reports(request.match_info["id"])
    # What the recipe made of it and of each report on it: the step that trained on it, or why it never will.
    steps = await daemon.store.steps.consumed_by([row["id"] for row in (record, *reports)])

    async def judged(row: StoredRecord) -> JudgedRecord:
        ineligible = await daemon.store.steps.ineligible_reason(row["id"])
        return {**row, "consumed_by_step": steps.get(row["id"]), "ineligible": ineligible}

    detail: RecordDetail = {
        **record,
        "reports": [await judged(report) for report in reports],
        "consumed_by_step": steps.get(record["id"]),
        "ineligible": await daemon.store.steps.ineligible_reason(record["id"]),
        "cost_usd": daemon.prices.record_cost(record),
    }
    return json_response(detail)
