"""Releases: the steps a scenario's recipe committed, newest first; promote and roll back."""

from __future__ import annotations

import base64

from aiohttp import web

from reef_contract import (
    PROMOTE_ROUTE,
    RELEASE_FILES_ROUTE,
    RELEASES_ROUTE,
    ROLLBACK_ROUTE,
    ReleaseFiles,
    ReleaseList,
    ReleaseRow,
    StepRow,
)
from reef_daemon.context import DAEMON
from reef_daemon.errors import BadRequest, Unsupported
from reef_daemon.jsonbody import json_response, read_json_object
from reef_daemon.names import check_scenario_name

routes = web.RouteTableDef()


@routes.get(RELEASES_ROUTE)
async def list_releases(request: web.Request) -> web.Response:
    daemon = request.app[DAEMON]
    scenario = daemon.store.scenarios.require(check_scenario_name(request.match_info["scenario"]))
    current = daemon.recipe.current_release(scenario.name)
    history = await daemon.store.steps.history(scenario.name)
    steps = [_release(step, current is not None and step["release_id"] == current) for step in history]
    body: ReleaseList = {"scenario": scenario.name, "releases": await daemon.recipe.describe_releases(scenario, steps)}
    return json_response(body)


@routes.get(RELEASE_FILES_ROUTE)
async def release_files(request: web.Request) -> web.Response:
    daemon = request.app[DAEMON]
    scenario = daemon.store.scenarios.require(check_scenario_name(request.match_info["scenario"]))
    release_id = request.match_info["release_id"]
    files = await daemon.recipe.release_files(scenario, release_id)
    encoded = {name: base64.b64encode(content).decode("ascii") for name, content in files.items()}
    body: ReleaseFiles = {"scenario": scenario.name, "release_id": release_id, "files": encoded}
    return json_response(body)


def _release(step: StepRow, current: bool) -> ReleaseRow:
    """A committed step as a release row; a recipe that reviews releases adds the optional keys."""
    return {**step, "current": current}  # type: ignore[typeddict-item]  # a StepRow has none of the optional keys


async def _release_change(request: web.Request, operation: str) -> web.Response:
    daemon = request.app[DAEMON]
    scenario = daemon.store.scenarios.require(check_scenario_name(request.match_info["scenario"]))
    body = await read_json_object(request)
    release_id = body.get("release_id")
    if not isinstance(release_id, str) or not release_id.strip():
        raise BadRequest('send {"release_id": "..."} naming a release of this scenario', type="invalid_release")
    if not daemon.recipe.trains:
        raise Unsupported(f"the {daemon.recipe.name} recipe publishes no releases", type="no_releases")
    # A canary running beside the old head ends with it, in the step's transaction (the step store ends it).
    step = await daemon.workers.change_release(scenario, operation, release_id.strip())
    head = _release(step, step["release_id"] == daemon.recipe.current_release(scenario.name))
    return json_response(head)


@routes.post(PROMOTE_ROUTE)
async def promote(request: web.Request) -> web.Response:
    return await _release_change(request, "promote")


@routes.post(ROLLBACK_ROUTE)
async def rollback(request: web.Request) -> web.Response:
    return await _release_change(request, "rollback")
