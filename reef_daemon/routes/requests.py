"""Change requests: `POST /reef/requests` files one for the scenario's harness (screened, stored, then queued for a
step; `POST /reef/train`, its first path, still answers), and `GET /reef/requests/{id}` says where it stands. The
committed step that consumed a request settles it; a settled one carries the evaluation gate's evidence (None when
its step ran no gate)."""

from __future__ import annotations

import re
import time
from typing import Any

from aiohttp import web

from reef_contract import (
    REQUEST_ROUTE,
    REQUESTS_ROUTE,
    SCENARIO_HEADER,
    TRAIN_ROUTE,
    RequestAck,
    RequestProgress,
    StepRow,
)
from reef_daemon.context import DAEMON
from reef_daemon.errors import BadRequest, NotFound
from reef_daemon.harness.access import harness_recipe
from reef_daemon.harness.screens import screen_request
from reef_daemon.ids import new_record_id
from reef_daemon.jsonbody import json_response, read_json_object
from reef_daemon.names import scenario_from_header
from reef_daemon.records import ClientRecordDraft
from reef_daemon.reports import content_hash
from reef_daemon.store import Store

routes = web.RouteTableDef()

MAX_TEXT = 4000
MAX_FIELD = 200
FIELDS = ("text", "session", "release_id", "client", "agent_record_id")
# The id becomes a path segment of `progress_path`: nothing that a URL or a path would read differently.
_REQUEST_ID = re.compile(r"[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,127}")


@routes.post(REQUESTS_ROUTE)
@routes.post(TRAIN_ROUTE)
async def post_request(request: web.Request) -> web.Response:
    daemon = request.app[DAEMON]
    harness_recipe(daemon)  # 501 before anything is read when the recipe evolves no harness
    scenario_name = scenario_from_header(request.headers.get(SCENARIO_HEADER))
    body = await read_json_object(request)
    content = _content(body)
    scenario = daemon.store.scenarios.require(scenario_name)
    if scenario.training_mode == "auto":
        raise BadRequest(
            f"scenario '{scenario.name}' is in auto mode, which learns from scores only; switch it to manual or "
            "hybrid to send change requests",
            type="wrong_training_mode",
        )
    request_id = body.get("agent_record_id") or new_record_id()
    draft = ClientRecordDraft(
        request_id, scenario.name, "request", time.time(), content, content_hash(scenario.name, content)
    )
    row, _created = await daemon.store.records.append_client_record(draft)
    ack: RequestAck = {
        "agent_record_id": row["id"],
        "scenario": scenario.name,
        "request_type": "request",
        "progress_path": REQUEST_ROUTE.format(request_id=row["id"]),
    }
    return json_response(ack, status=202)


def _content(body: dict[str, Any]) -> dict[str, Any]:
    """The stored request: checked field by field; the text never appears in an error."""
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise BadRequest(f"unknown field {', '.join(unknown)}; send text and optionally {', '.join(FIELDS[1:])}")
    text = body.get("text")
    if not isinstance(text, str) or not text.strip():
        raise BadRequest("text must be a non-empty string saying what to change", type="invalid_text")
    if len(text) > MAX_TEXT:
        raise BadRequest(f"text is longer than {MAX_TEXT} characters; shorten it", type="invalid_text")
    rule = screen_request(text)
    if rule is not None:
        raise BadRequest(
            f"the text contains {rule.what} (rule {rule.name}); remove it and send the request again",
            type="refused_text",
        )
    content: dict[str, Any] = {"text": text.strip()}
    for name in ("session", "release_id", "agent_record_id"):
        value = body.get(name)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_FIELD:
            raise BadRequest(f"{name} must be a string of at most {MAX_FIELD} characters", type=f"invalid_{name}")
        if name != "agent_record_id":
            content[name] = value.strip()
        elif not _REQUEST_ID.fullmatch(value):
            raise BadRequest(
                "agent_record_id must be 1 to 128 letters, digits, '_', ':', '-' or '.', not starting with '.'",
                type="invalid_agent_record_id",
            )
    client = body.get("client")
    if client is not None:
        if not isinstance(client, dict) or len(str(client)) > 4096:
            raise BadRequest("client must be a small JSON object describing the machine", type="invalid_client")
        content["client"] = client
    return content


@routes.get(REQUEST_ROUTE)
async def get_request(request: web.Request) -> web.Response:
    daemon = request.app[DAEMON]
    progress = harness_recipe(daemon).progress
    request_id = request.match_info["request_id"]
    record = await daemon.store.records.get(request_id)
    if record["type"] != "request":
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
