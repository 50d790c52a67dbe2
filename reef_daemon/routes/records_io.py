"""Records in and out: `POST /reef/records/batch` imports conversations, `GET /reef/export` streams a scenario's
records as JSON lines in a training format."""

from __future__ import annotations

import json
import logging
import math
from datetime import UTC, datetime
from functools import partial

from aiohttp import web

from reef_contract import (
    EXPORT_FORMATS,
    EXPORT_ROUTE,
    EXPORT_TOTAL_HEADER,
    MAX_BATCH,
    RECORDS_BATCH_ROUTE,
    SCENARIO_HEADER,
    BatchAck,
    ImportResult,
)
from reef_daemon.context import DAEMON
from reef_daemon.errors import BadRequest, NotFound
from reef_daemon.jsonbody import json_response, read_json_object
from reef_daemon.names import check_scenario_name, scenario_from_header
from reef_daemon.records_io.exported import Skipped, export_lines, query_for
from reef_daemon.records_io.imported import Refused, checked, draft_of
from reef_daemon.store import DraftFor

routes = web.RouteTableDef()
log = logging.getLogger("reef.export")


@routes.post(RECORDS_BATCH_ROUTE)
async def import_batch(request: web.Request) -> web.Response:
    """Store each conversation of `{"records": [...]}`; a refused one is reported by index, the others kept."""
    daemon = request.app[DAEMON]
    scenario = scenario_from_header(request.headers.get(SCENARIO_HEADER))
    body = await read_json_object(request)
    conversations = body.get("records")
    if not isinstance(conversations, list):
        raise BadRequest('the body must be {"records": [conversation, ...]}', type="invalid_batch")
    if len(conversations) > MAX_BATCH:
        raise BadRequest(f"a batch holds at most {MAX_BATCH} conversations; send several", type="invalid_batch")
    results: list[ImportResult] = []
    drafts: list[tuple[int, DraftFor]] = []
    for index, value in enumerate(conversations):
        try:
            drafts.append((index, partial(draft_of, scenario, checked(value, daemon.reports.score_scale))))
        except Refused as exc:
            results.append({"index": index, "status": "refused", "id": None, "report_id": None, "reason": str(exc)})
    if drafts:
        await daemon.ensure_scenario(scenario)
        outcomes = await daemon.store.imports.append([draft_for for _, draft_for in drafts])
        for (index, _), (status, record_id, report_id) in zip(drafts, outcomes, strict=True):
            results.append({"index": index, "status": status, "id": record_id, "report_id": report_id,
                            "reason": None})  # fmt: skip
    results.sort(key=lambda result: result["index"])
    ack: BatchAck = {
        "scenario": scenario,
        "results": results,
        "imported": sum(r["status"] == "imported" for r in results),
        "duplicate": sum(r["status"] == "duplicate" for r in results),
        "refused": sum(r["status"] == "refused" for r in results),
    }
    return json_response(ack)


@routes.get(EXPORT_ROUTE)
async def export(request: web.Request) -> web.StreamResponse:
    """JSON lines of a scenario's records in `format`, streamed a page at a time. Only answers that arrived whole
    unless `include_cut=true`. A failure part way ends the body without its last chunk, so no client takes a
    short export for a whole one."""
    daemon = request.app[DAEMON]
    scenario = request.query.get("scenario") or ""
    if not scenario:
        raise BadRequest("name the scenario to export: ?scenario=NAME", type="invalid_query")
    check_scenario_name(scenario)
    format = request.query.get("format") or "openai"
    if format not in EXPORT_FORMATS:
        raise BadRequest(f"format must be one of {', '.join(EXPORT_FORMATS)}", type="invalid_query")
    query = query_for(format, scenario, _min_score(request), _since(request), include_cut=_include_cut(request))
    if not await daemon.store.exports.known(scenario):
        raise NotFound(f"no scenario named '{scenario}'", type="unknown_scenario")
    total = await daemon.store.exports.count(query)
    page_bytes = max(1, int(daemon.settings.reef.export_page_mb * 1024 * 1024))
    skipped = Skipped()
    response = web.StreamResponse(headers={EXPORT_TOTAL_HEADER: str(total)})
    response.content_type = "application/x-ndjson"
    try:
        await response.prepare(request)
        async for line in export_lines(format, daemon.store.exports, query, page_bytes=page_bytes, skipped=skipped):
            await response.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
        await response.write_eof()
    except ConnectionError:  # the client left; nobody is reading the rest
        log.info("export of %s as %s: the client left before its end", scenario, format)
    if skipped.ids:
        log.warning("export of %s as %s left out %d record(s) that cannot be rendered", scenario, format,
                    len(skipped.ids))  # fmt: skip
    return response


def _min_score(request: web.Request) -> float | None:
    raw = request.query.get("min_score")
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise BadRequest("min_score must be a number", type="invalid_query")
    return value


def _include_cut(request: web.Request) -> bool:
    raw = (request.query.get("include_cut") or "false").lower()
    if raw not in ("true", "false", "1", "0"):
        raise BadRequest("include_cut must be true or false", type="invalid_query")
    return raw in ("true", "1")


def _since(request: web.Request) -> float | None:
    """`since` as epoch seconds: given as a date, an ISO 8601 time (UTC unless it says), or epoch seconds."""
    raw = request.query.get("since")
    if not raw:
        return None
    message = "since must be a date (2026-01-31), an ISO 8601 time or epoch seconds"
    try:
        value = float(raw)
    except ValueError:
        pass
    else:
        if not math.isfinite(value):
            raise BadRequest(message, type="invalid_query")
        return value
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise BadRequest(message, type="invalid_query") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
