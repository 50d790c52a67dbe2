"""Reading JSON request bodies: one place that turns bad JSON into a 400 that says what is wrong."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from reef_daemon.errors import BadRequest


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_json_object(body: bytes, what: str = "the request body") -> dict[str, Any]:
    """Parse strict JSON (no NaN or Infinity) that must be an object."""
    if not body.strip():
        raise BadRequest(f"{what} is empty; send a JSON object", type="invalid_json")
    try:
        value = json.loads(body, parse_constant=_refuse_constant)
    except UnicodeDecodeError:
        raise BadRequest(f"{what} is not UTF-8 text", type="invalid_json") from None
    except ValueError as exc:
        raise BadRequest(f"{what} is not valid JSON: {exc}", type="invalid_json") from None
    if not isinstance(value, dict):
        raise BadRequest(f"{what} must be a JSON object, not {type(value).__name__}", type="invalid_json")
    return value


async def read_json_object(request: web.Request) -> dict[str, Any]:
    return parse_json_object(await request.read())


def json_response(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
    )
