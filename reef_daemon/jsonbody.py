"""Reading request bodies: one place that bounds how long a body may take and turns bad JSON into a 400 that
says what is wrong."""

from __future__ import annotations

import asyncio
import json
import math
import re
from typing import Any

import orjson
from aiohttp import web

from reef_daemon.errors import BadRequest, RequestTimeout
from reef_daemon.jsoncodec import may_hold_a_long_integer

# A body that has not arrived in full by then (a never-ending chunked upload, say) is refused and its
# connection closed, so a client cannot hold connections open by sending slowly.
BODY_READ_TIMEOUT_S = 60.0
# A body this large is parsed in a worker thread: the parse of a large one (seconds for tens of MiB) would
# otherwise hold up every other request, /healthz included. Smaller ones cost less than the hand-off.
PARSE_ON_LOOP_BYTES = 256 * 1024
# A lone surrogate can only arrive escaped (`\ud800`): a body without such an escape needs no walk of its values.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    # JSON has no infinity; a number too large for a double (1e400) would come back from a store as one.
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def parse_json_object(body: bytes, what: str = "the request body") -> dict[str, Any]:
    """Parse strict JSON that must be an object: UTF-8, no NaN or Infinity, no number beyond a double's range, no
    text that is not Unicode (a lone surrogate, which can only arrive escaped)."""
    if not body.strip():
        raise BadRequest(f"{what} is empty; send a JSON object", type="invalid_json")
    try:
        value = _read_strictly(body, what, "") if may_hold_a_long_integer(body) else orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        value = _read_strictly(body, what, str(exc))
    if not isinstance(value, dict):
        raise BadRequest(f"{what} must be a JSON object, not {type(value).__name__}", type="invalid_json")
    return value


def _read_strictly(body: bytes, what: str, orjson_said: str) -> Any:
    """A body orjson refused (or would read inexactly), read by the standard library: refused with its plainer
    reason, or taken (an integer beyond 64 bits, which JSON allows)."""

    def refused(message: str) -> BadRequest:
        return BadRequest(message, type="invalid_json")

    try:
        value = json.loads(body, parse_constant=_refuse_constant, parse_float=_finite_float)
    except UnicodeDecodeError:
        raise refused(f"{what} is not UTF-8 text") from None
    except ValueError as exc:
        raise refused(f"{what} is not valid JSON: {exc}") from None
    except RecursionError:
        raise refused(f"{what} is nested too deeply") from None
    if "depth limit" in orjson_said:
        raise refused(f"{what} is nested too deeply")
    if "UTF-8" in orjson_said or "BOM" in orjson_said:
        raise refused(f"{what} is not UTF-8 text")
    where = _lone_surrogate(value, "") if _SURROGATE_ESCAPE.search(body) else None
    if where is not None:
        raise refused(f"{where or what}: holds a lone surrogate (\\ud800-\\udfff), which is not Unicode text")
    return value


async def parse_json_body(body: bytes, what: str = "the request body") -> dict[str, Any]:
    """`parse_json_object`, off the event loop when the body is large."""
    if len(body) < PARSE_ON_LOOP_BYTES:
        return parse_json_object(body, what)
    return await asyncio.to_thread(parse_json_object, body, what)


async def read_body(request: web.Request) -> bytes:
    """The whole request body, or a 408 when it takes longer than `BODY_READ_TIMEOUT_S`."""
    if request.content.is_eof():  # the body came whole with the head (most do): there is nothing to wait for
        return await request.read()
    try:
        async with asyncio.timeout(BODY_READ_TIMEOUT_S):
            return await request.read()
    except TimeoutError:
        raise RequestTimeout(
            f"the request body did not arrive within {BODY_READ_TIMEOUT_S:g} s", type="request_timeout"
        ) from None


async def read_json_object(request: web.Request) -> dict[str, Any]:
    """A control route's body: a JSON object whose text is all Unicode (it is stored as UTF-8)."""
    return await parse_json_body(await read_body(request))


def _lone_surrogate(value: Any, path: str) -> str | None:
    """The path (`feedback`, `records[2].text`) of the first text that cannot be encoded as UTF-8, or None."""
    if isinstance(value, str):
        return None if _is_unicode(value) else path
    if isinstance(value, list):
        for index, item in enumerate(value):
            if (found := _lone_surrogate(item, f"{path}[{index}]")) is not None:
                return found
    if isinstance(value, dict):
        for key, item in value.items():
            step = f"{path}.{key}" if path else str(key)
            if not _is_unicode(key):
                return f"{path or 'the request body'} (a field name)"
            if (found := _lone_surrogate(item, step)) is not None:
                return found
    return None


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def json_response(data: Any, status: int = 200) -> web.Response:
    """`data` as compact JSON, non-ASCII kept as is; text that is not Unicode (a lone surrogate a store kept from
    before such input was refused) is written escaped instead of failing the answer."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    try:
        body = text.encode()
    except UnicodeEncodeError:
        body = json.dumps(data, separators=(",", ":")).encode()
    return web.Response(body=body, status=status, content_type="application/json")
