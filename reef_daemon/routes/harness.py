"""`GET /reef/harness` (a release's files) and `GET /reef/harness/adapters` (what each adapter renders)."""

from __future__ import annotations

from aiohttp import web

from adapters import ADAPTERS
from reef_contract import (
    HARNESS_ADAPTERS_ROUTE,
    HARNESS_ROUTE,
    SCENARIO_HEADER,
    AdapterList,
    AdapterRow,
    HarnessFiles,
)
from reef_daemon.context import DAEMON
from reef_daemon.harness.access import harness_recipe
from reef_daemon.jsonbody import json_response
from reef_daemon.names import scenario_from_header
from reef_daemon.recipe_interface import HarnessRecipe

routes = web.RouteTableDef()


@routes.get(HARNESS_ROUTE)
async def get_harness(request: web.Request) -> web.Response:
    daemon = request.app[DAEMON]
    harness = harness_recipe(daemon).harness
    scenario = daemon.store.scenarios.require(scenario_from_header(request.headers.get(SCENARIO_HEADER)))
    served = await harness.served(scenario.name)
    release_id = request.query.get("release_id") or served.release_id
    release = await harness.read(scenario.name, release_id)
    versions = await harness.versions(scenario.name)
    body: HarnessFiles = {
        "scenario": scenario.name,
        "release_id": release.release_id,
        "version": versions.get(release.release_id),
        "current": release.release_id == served.release_id,
        "adapter": release.manifest.get("adapter"),
        "parent_release_id": release.manifest.get("parent_release_id"),
        "files": release.files,
        "requires": release.manifest.get("requires", []),
        "entries": release.manifest.get("entries", []),
    }
    return json_response(body)


@routes.get(HARNESS_ADAPTERS_ROUTE)
async def list_adapters(request: web.Request) -> web.Response:
    daemon = request.app[DAEMON]
    serving = daemon.recipe.harness.adapter.name if isinstance(daemon.recipe, HarnessRecipe) else None
    rows: list[AdapterRow] = [
        {**adapter.describe(), "serving": adapter.name == serving} for adapter in ADAPTERS.values()
    ]
    body: AdapterList = {"adapters": rows}
    return json_response(body)
