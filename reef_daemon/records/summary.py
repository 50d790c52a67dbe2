"""What a record keeps besides the request: the model, token usage, the assembled answer, the first words of the
exchange, and the response as stored.

Derived inside the exchange's commit (on the store's writer thread, or on the loop for a brief one: writer.py),
never while its bytes are relayed, so the proxy's relay stays a byte relay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from reef_contract import COUNT_TOKENS_ROUTE, Answer, RecordPreview
from reef_daemon.jsoncodec import dumps_text
from reef_daemon.records.assemble import assemble, json_object
from reef_daemon.records.drafts import InferenceDraft
from reef_daemon.records.preview import preview


@dataclass(frozen=True)
class InferenceSummary:
    """What the writer stores besides the raw bytes: derived once, off the event loop."""

    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    response: bytes
    answer: Answer | None  # None where the exchange has no assistant message (an error, count_tokens)
    preview: RecordPreview | None = None  # None where there are no words to show


def summarize(draft: InferenceDraft) -> InferenceSummary:
    """The model, usage, answer and first words of an exchange, and its response as the store keeps it."""
    answer = assemble(draft.route, draft.response, stream=draft.stream) if draft.status < 400 else None
    model = answer["model"] if answer is not None and answer["model"] else draft.model
    input_tokens = answer["usage"]["input_tokens"] if answer is not None else None
    output_tokens = answer["usage"]["output_tokens"] if answer is not None else None
    if answer is not None and draft.tokens is not None:  # the embedded model's own count, where the answer has none
        input_tokens = _counted(input_tokens, draft.tokens.get("prompt_ids"))
        output_tokens = _counted(output_tokens, draft.tokens.get("output_ids"))
    words = preview(draft.route, draft.payload if draft.payload is not None else draft.request, answer)
    if draft.stream:
        return InferenceSummary(model, input_tokens, output_tokens, _stored_stream(draft), answer, words)
    if draft.route == COUNT_TOKENS_ROUTE:
        counted = json_object(draft.response).get("input_tokens")
        input_tokens = counted if isinstance(counted, int) else None
    return InferenceSummary(model, input_tokens, output_tokens, draft.response, answer, words)


def _counted(reported: int | None, ids: Any) -> int | None:
    """The count the answer reported, else the number of token ids the model made (a stream that was not asked
    for its usage reports none)."""
    return reported if reported is not None or not isinstance(ids, list) else len(ids)


def stored_answer(route: str, response: bytes | str | None) -> Answer | None:
    """The answer of a stored response: a JSON body, or a stream kept as `{"stream": true, "body": <SSE text>}`."""
    raw = response.encode() if isinstance(response, str) else response or b""
    stored = json_object(raw)
    if stored.get("stream") is True and isinstance(stored.get("body"), str):
        return assemble(route, stored["body"].encode(), stream=True)
    return assemble(route, raw, stream=False)


def _stored_stream(draft: InferenceDraft) -> bytes:
    """A stream is stored as its raw SSE text with how it ended; its answer is kept beside it, assembled."""
    stored: dict[str, Any] = {
        "stream": True,
        "status": draft.status,
        "complete": draft.complete,
        "body": draft.response.decode("utf-8", errors="replace"),
    }
    if draft.error:
        stored["error"] = draft.error
    try:
        return orjson.dumps(stored)
    except TypeError:  # an error text that is not Unicode (a lone surrogate)
        return dumps_text(stored).encode()
