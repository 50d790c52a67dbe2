"""A scenario's evaluation tasks: add, list a page of them (with the current replays), show, remove; promote or
dismiss a replay."""

from __future__ import annotations

from aiohttp import web

from reef_contract import (
    TASK_DISMISS_ROUTE,
    TASK_PAGE_DEFAULT,
    TASK_PAGE_MAX,
    TASK_PROMOTE_ROUTE,
    TASK_ROUTE,
    TASKS_ROUTE,
    EvalTask,
    ReplayDismissed,
    TaskList,
)
from reef_daemon.context import DAEMON, Daemon
from reef_daemon.errors import BadRequest
from reef_daemon.jsonbody import json_response, read_json_object
from reef_daemon.names import check_scenario_name
from reef_daemon.store import TaskLimits
from reef_daemon.task_input import checked_task
from reef_daemon.untrusted_regex import RegexBounds

routes = web.RouteTableDef()


def _scenario(request: web.Request) -> tuple[Daemon, str]:
    """The daemon and the scenario named in the path; 404 when there is no such scenario."""
    daemon = request.app[DAEMON]
    return daemon, daemon.store.scenarios.require(check_scenario_name(request.match_info["scenario"])).name


@routes.get(TASKS_ROUTE)
async def list_tasks(request: web.Request) -> web.Response:
    daemon, scenario = _scenario(request)
    page = await daemon.store.tasks.page(scenario, request.query.get("after") or None, _page_limit(request))
    body: TaskList = {
        "scenario": scenario,
        "tasks": page.tasks,
        "replays": await daemon.store.tasks.replays(
            scenario, daemon.settings.harness.replays, daemon.settings.reports.sources
        ),
        "next_after": page.next_after,
    }
    return json_response(body)


def _page_limit(request: web.Request) -> int:
    raw = request.query.get("limit") or str(TASK_PAGE_DEFAULT)
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= TASK_PAGE_MAX:
        raise BadRequest(f"limit must be a whole number from 1 to {TASK_PAGE_MAX}", type="invalid_query")
    return int(raw)


@routes.post(TASKS_ROUTE)
async def add_task(request: web.Request) -> web.Response:
    daemon, scenario = _scenario(request)
    harness = daemon.settings.harness
    bounds = RegexBounds(harness.regex_compile_s, harness.regex_compile_mb)
    draft = await checked_task(scenario, await read_json_object(request), bounds)
    limits = TaskLimits(harness.max_tasks, harness.max_task_fixture_chars)
    task: EvalTask = await daemon.store.tasks.add(draft, limits)
    return json_response(task, status=201)


@routes.get(TASK_ROUTE)
async def show_task(request: web.Request) -> web.Response:
    daemon, scenario = _scenario(request)
    task: EvalTask = await daemon.store.tasks.get(scenario, request.match_info["task"])
    return json_response(task)


@routes.delete(TASK_ROUTE)
async def remove_task(request: web.Request) -> web.Response:
    daemon, scenario = _scenario(request)
    task: EvalTask = await daemon.store.tasks.remove(scenario, request.match_info["task"])
    return json_response(task)


@routes.post(TASK_PROMOTE_ROUTE)
async def promote_replay(request: web.Request) -> web.Response:
    daemon, scenario = _scenario(request)
    task: EvalTask = await daemon.store.tasks.promote(scenario, request.match_info["task"])
    return json_response(task, status=201)


@routes.post(TASK_DISMISS_ROUTE)
async def dismiss_replay(request: web.Request) -> web.Response:
    daemon, scenario = _scenario(request)
    replay_id = request.match_info["task"]
    await daemon.store.tasks.dismiss(scenario, replay_id)
    body: ReplayDismissed = {"scenario": scenario, "id": replay_id, "dismissed": True}
    return json_response(body)
