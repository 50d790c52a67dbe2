"""`GET /healthz` (no auth) and `GET /reef/status`."""

from __future__ import annotations

from aiohttp import web

from reef_contract import HEALTH_ROUTE, SPEND_ROUTE, STATUS_ROUTE, Health, ScenarioCounts, SpendAnswer, Status
from reef_daemon import __version__
from reef_daemon.context import DAEMON
from reef_daemon.jsonbody import json_response

routes = web.RouteTableDef()


@routes.get(HEALTH_ROUTE)
async def healthz(request: web.Request) -> web.Response:
    failure = request.app[DAEMON].runtime.failure()
    if failure is not None:
        down: Health = {"ok": False, "error": failure}
        return json_response(down, status=503)
    health: Health = {"ok": True}
    return json_response(health)


@routes.get(STATUS_ROUTE)
async def status(request: web.Request) -> web.Response:
    daemon = request.app[DAEMON]
    counts = await daemon.store.records.counts()
    scenarios: dict[str, ScenarioCounts] = {}
    for scenario in daemon.store.scenarios.all():
        per_type = counts.get(scenario.name, {})
        scenarios[scenario.name] = {
            "recipe": scenario.recipe,
            "training_mode": scenario.training_mode,
            "records": per_type.get("inference", 0),
            "reports": per_type.get("report", 0),
            "unscored": per_type.get("unscored", 0),
        }
    writer = daemon.store.writer
    retention = daemon.store.retention
    usage = retention.last_usage
    body: Status = {
        "version": __version__,
        **daemon.status(),
        "scenarios": scenarios,
        "training": {"enabled": daemon.recipe.trains, "scenarios": await daemon.workers.status()},
        "store": {
            "engine": daemon.store.engine.name,
            "path": daemon.store.engine.describe(),
            "commits": writer.batches,
            "writes": writer.operations,
            "max_bytes": retention.budget.max_bytes,
            "max_age_s": retention.budget.max_age_s,
            "body_bytes": usage.body_bytes if usage else None,
            "trimmed": usage.trimmed if usage else None,
        },
        "score_scale": {"min": daemon.reports.score_scale[0], "max": daemon.reports.score_scale[1]},
        "next_turn": daemon.next_turn.counts.status() if daemon.next_turn is not None else None,
        "sources": await daemon.store.trust.agreements(),
        "telemetry": daemon.telemetry.state() if daemon.telemetry is not None else None,
    }
    return json_response(body)


@routes.get(SPEND_ROUTE)
async def spend(request: web.Request) -> web.Response:
    """What each scenario's exchanges, and the judge's calls by the source that asked, cost (one scan of the
    store's token counts)."""
    daemon = request.app[DAEMON]
    body: SpendAnswer = {
        "scenarios": daemon.prices.spend(await daemon.store.spend.by_scenario()),
        "judge": daemon.prices.spend(await daemon.store.spend.judge_by_source()),
    }
    return json_response(body)
