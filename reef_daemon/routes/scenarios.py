"""Scenarios: list, create, change training mode or move to the deployment's recipe, archive."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from reef_contract import (
    SCENARIO_ROUTE,
    SCENARIO_UPDATE_ROUTE,
    SCENARIOS_ROUTE,
    ArchiveAck,
    ScenarioInfo,
    ScenarioList,
    ScenarioRow,
)
from reef_daemon.context import DAEMON
from reef_daemon.errors import BadRequest
from reef_daemon.jsonbody import json_response, read_json_object
from reef_daemon.names import check_scenario_name
from reef_daemon.store import TRAINING_MODES

routes = web.RouteTableDef()


def _training_mode(body: dict[str, Any], *, required: bool) -> str | None:
    mode = body.get("training_mode")
    if mode is None and not required:
        return None
    if mode not in TRAINING_MODES:
        raise BadRequest(f"training_mode must be one of {', '.join(TRAINING_MODES)}", type="invalid_training_mode")
    return str(mode)


@routes.get(SCENARIOS_ROUTE)
async def list_scenarios(request: web.Request) -> web.Response:
    daemon = request.app[DAEMON]
    counts = await daemon.store.records.counts()
    rows: list[ScenarioRow] = []
    for scenario in daemon.store.scenarios.all():
        per_type = counts.get(scenario.name, {})
        row: ScenarioRow = {
            **scenario.to_json(),
            "records": per_type.get("inference", 0),
            "reports": per_type.get("report", 0),
            "unscored": per_type.get("unscored", 0),
            "current_release": daemon.recipe.current_release(scenario.name),
        }
        rows.append(row)
    body: ScenarioList = {"scenarios": rows}
    return json_response(body)


@routes.post(SCENARIOS_ROUTE)
async def create_scenario(request: web.Request) -> web.Response:
    daemon = request.app[DAEMON]
    body = await read_json_object(request)
    name = body.get("name")
    if not isinstance(name, str):
        raise BadRequest("name must be a string naming the scenario", type="invalid_scenario")
    name = check_scenario_name(name.strip())
    unknown = sorted(set(body) - {"name", "training_mode"})
    if unknown:
        raise BadRequest(f"unknown field {', '.join(unknown)}; send name and optionally training_mode")
    mode = _training_mode(body, required=False) or daemon.recipe.default_training_mode
    scenario, created = await daemon.store.scenarios.ensure(name, daemon.recipe.name, mode)
    info: ScenarioInfo = scenario.to_json()
    return json_response(info, status=201 if created else 200)


@routes.post(SCENARIO_UPDATE_ROUTE)
async def update_scenario(request: web.Request) -> web.Response:
    """Change a scenario's training mode, or move it to the deployment's recipe (`{"recipe": NAME}`)."""
    daemon = request.app[DAEMON]
    name = check_scenario_name(request.match_info["scenario"])
    current = daemon.store.scenarios.require(name)
    body = await read_json_object(request)
    unknown = sorted(set(body) - {"training_mode", "recipe"})
    if unknown or not body:
        raise BadRequest(
            'send {"training_mode": "auto|manual|hybrid"} or {"recipe": "<this daemon\'s recipe>"}',
            type="invalid_update",
        )
    mode = _training_mode(body, required=False)
    if "recipe" in body:
        recipe = body["recipe"]
        if recipe != daemon.recipe.name:
            raise BadRequest(
                f"this daemon runs recipe '{daemon.recipe.name}'; a scenario can move only to it",
                type="invalid_recipe",
            )
        if current.recipe != recipe:
            moved = await daemon.store.scenarios.move_to_recipe(
                name, recipe, mode or daemon.recipe.default_training_mode
            )
            daemon.workers.adopt(name)
            info: ScenarioInfo = moved.to_json()
            return json_response(info)
    scenario = current if mode is None else await daemon.store.scenarios.set_training_mode(name, mode)
    info = scenario.to_json()
    return json_response(info)


@routes.delete(SCENARIO_ROUTE)
async def archive_scenario(request: web.Request) -> web.Response:
    daemon = request.app[DAEMON]
    name = check_scenario_name(request.match_info["scenario"])
    archived_as = await daemon.store.scenarios.archive(name)
    body: ArchiveAck = {"scenario": name, "archived": True, "archived_as": archived_as}
    return json_response(body)
