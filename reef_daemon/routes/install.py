"""`GET /reef/harness/install?adapter=<name>[&release_id=]`: a POSIX sh script installing a release (adapters: pi,
codex, dsh, claude, opencode).

Failures answer 200 with a script that prints the reason and exits 1: `curl -fsS ... | sh` would otherwise
swallow the reason. The header `x-reef-install-error` carries the error type for clients that check.
"""

from __future__ import annotations

import re

from aiohttp import web

from adapters import Binding, get_adapter
from reef_contract import INSTALL_ERROR_HEADER, INSTALL_ROUTE, SCENARIO_HEADER
from reef_daemon.context import DAEMON, Daemon
from reef_daemon.errors import BadRequest, ReefError
from reef_daemon.harness.access import harness_recipe
from reef_daemon.harness.install import CanaryTree, failure_script, install_files, install_script
from reef_daemon.names import scenario_from_header
from reef_harness import entries_from_json

routes = web.RouteTableDef()

# Adapters whose sandbox lets commands write /tmp and $TMPDIR: an install there could be changed by a session.
SANDBOX_WRITES_TMP = frozenset({"codex", "dsh", "claude"})
_HOST = re.compile(r"[A-Za-z0-9.-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?")


@routes.get(INSTALL_ROUTE)
async def get_install(request: web.Request) -> web.Response:
    try:
        script = await _script(request)
    except ReefError as exc:
        response = _shell(failure_script(exc.message))
        response.headers[INSTALL_ERROR_HEADER] = exc.type
        return response
    return _shell(script)


async def _script(request: web.Request) -> str:
    daemon = request.app[DAEMON]
    harness = harness_recipe(daemon).harness
    name = request.query.get("adapter", "").strip()
    if not name:
        raise BadRequest(
            "say which agent to install for: ?adapter=pi, codex, dsh, claude or opencode", type="missing_adapter"
        )
    try:
        adapter = get_adapter(name[:64])
    except ValueError as exc:
        raise BadRequest(str(exc), type="unknown_adapter") from None
    scenario = await daemon.ensure_scenario(scenario_from_header(request.headers.get(SCENARIO_HEADER)))
    served = await harness.served(scenario.name)
    release_id = request.query.get("release_id") or served.release_id
    release = await harness.read(scenario.name, release_id)
    version = (await harness.versions(scenario.name)).get(release.release_id, "unpublished")
    binding = Binding(_base_url(request), scenario.name, _served_model(daemon), release.release_id)
    canary = None if request.query.get("release_id") else await _canary(daemon, scenario.name, binding)
    install = install_files(adapter, entries_from_json(release.manifest["entries"]), binding, version, canary)
    return install_script(
        adapter.name,
        f"reef-{adapter.name}",
        install,
        scenario=scenario.name,
        release_id=release.release_id,
        version=version,
        auth=daemon.gate.enabled,
        sandbox_writes_tmp=adapter.name in SANDBOX_WRITES_TMP,
    )


async def _canary(daemon: Daemon, scenario: str, served: Binding) -> CanaryTree | None:
    """The running canary's tree, installed beside the served one so the wrapper can pick per session."""
    state = await daemon.store.canaries.get(scenario)
    if state is None or state["release_id"] == served.release_id:
        return None
    release = await harness_recipe(daemon).harness.read(scenario, state["release_id"])
    binding = Binding(served.url, served.scenario, served.model, release.release_id)
    return CanaryTree(entries_from_json(release.manifest["entries"]), binding, state["version"], state["share"])


def _base_url(request: web.Request) -> str:
    """The URL the client reached, as a proxy in front of reef says (x-forwarded-proto/host) or as seen here."""
    proto = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower() or request.scheme
    host = request.headers.get("x-forwarded-host", "").split(",")[0].strip() or request.host
    if proto not in ("http", "https") or not _HOST.fullmatch(host):
        raise BadRequest("the request's host or x-forwarded-host/proto is not a plain host and scheme", type="bad_host")
    return f"{proto}://{host}"


def _served_model(daemon: Daemon) -> str:
    model = daemon.settings.inference.upstream_model or daemon.runtime.describe().get("model")
    return str(model or "reef")


def _shell(script: str) -> web.Response:
    return web.Response(text=script, content_type="text/x-shellscript", charset="utf-8")
