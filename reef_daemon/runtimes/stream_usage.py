"""Asking an OpenAI-compatible upstream for a chat stream's token usage when the client did not.

Such servers report usage in a stream only when the body says `"stream_options": {"include_usage": true}`; they
then send one more chunk, `choices: []` with the `usage`, before `data: [DONE]`. Reef adds the option so that the
record has token counts; the relay (proxy/sse.py) keeps that chunk from the client, which gets the stream it asked
for. An upstream that refuses the option with a 400 naming it is asked again without it.
"""

from __future__ import annotations

from typing import Any

from reef_contract import CHAT_ROUTE
from reef_daemon.jsoncodec import dumps_text

_OPTION = b'"stream_options":{"include_usage":true},'
# Statuses with which a server refuses a field it does not know (FastAPI-based servers answer 422).
REFUSAL_STATUSES = frozenset({400, 422})


def usage_asked(route: str, body: bytes, payload: dict[str, Any]) -> bytes | None:
    """`body` asking for the stream's usage, for a streamed chat completion that does not ask itself; else None.

    The option goes in front of the client's own fields, so the rest of its bytes go upstream unchanged; only a body
    with `stream_options` of its own (without `include_usage: true`) is written anew.
    """
    if route != CHAT_ROUTE or payload.get("stream") is not True:
        return None
    options = payload.get("stream_options")
    if "stream_options" not in payload:
        stripped = body.lstrip()
        if stripped[:1] == b"{":  # a UTF-8 object (a UTF-16 body, which JSON allows, is written anew below)
            at = len(body) - len(stripped) + 1
            return body[:at] + _OPTION + body[at:]
    elif options is not None and (not isinstance(options, dict) or options.get("include_usage") is True):
        return None  # asked for already, or an option the upstream will say is wrong
    return dumps_text({**payload, "stream_options": {**(options or {}), "include_usage": True}}).encode()


def refuses_the_option(status: int, body: bytes) -> bool:
    """Whether an upstream's answer refuses `stream_options` (a server that does not know it)."""
    return status in REFUSAL_STATUSES and b"stream_options" in body
