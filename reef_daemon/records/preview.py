"""The words of an exchange. For lists (`preview` in `GET /reef/records`): the last message the user wrote and the
start of the answer, each flattened to one line, derived once when the writer records the exchange. For replay tasks:
the opening user turn in full."""

from __future__ import annotations

from typing import Any

from reef_contract import PREVIEW_CHARS, RESPONSES_ROUTE, Answer, RecordPreview
from reef_daemon.jsoncodec import loads_lenient

_TEXT_BLOCKS = ("text", "input_text", "output_text")


def preview(route: str, request: bytes | str | dict[str, Any] | None, answer: Answer | None) -> RecordPreview | None:
    """What was asked and the start of what was answered; None when there is neither."""
    asked, answered = _asked(route, request), _answered(answer)
    if asked is None and answered is None:
        return None
    return {"asked": asked, "answered": answered}


def _asked(route: str, request: bytes | str | dict[str, Any] | None) -> str | None:
    """The text of the last user message that has text (a message carrying only tool results is skipped)."""
    for text in reversed(_user_texts(route, request)):
        line = _line(text)
        if line:
            return line
    return None


def opening_turn(route: str, request: bytes | str | None) -> str | None:
    """The full text of the first user message that has text: the turn a conversation opened with (replays run it
    again). None where there is none (a request of tool results only, an import without a user turn)."""
    for text in _user_texts(route, request):
        if text.strip():
            return text.strip()
    return None


def _user_texts(route: str, request: bytes | str | dict[str, Any] | None) -> list[str]:
    """The text of each user message of a request (stored, or already parsed), in order (empty for one without
    text)."""
    try:
        body = request if isinstance(request, dict) else loads_lenient(request or b"")
    except (ValueError, RecursionError):
        return []
    if not isinstance(body, dict):
        return []
    if route == RESPONSES_ROUTE:
        items = body.get("input")
        if isinstance(items, str):
            return [items]
        messages = [i for i in _list(items) if isinstance(i, dict) and i.get("type", "message") == "message"]
    else:
        messages = [m for m in _list(body.get("messages")) if isinstance(m, dict)]
    return [_content_text(m.get("content")) for m in messages if m.get("role") == "user"]


def _answered(answer: Answer | None) -> str | None:
    """The answer's text; where it has none, the tools it called."""
    if answer is None:
        return None
    text = " ".join(part["text"] for part in answer["parts"] if part["type"] == "text")
    if not text.strip():
        parts = answer["parts"]
        calls = [f"{part['name'] or '?'}({part['arguments']})" for part in parts if part["type"] == "tool_call"]
        text = "→ " + " ".join(calls) if calls else ""
    return _line(text)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts = [str(block.get("text", "")) for block in _list(content) if isinstance(block, dict)
             and block.get("type") in _TEXT_BLOCKS]  # fmt: skip
    return "\n".join(texts)


def _line(text: str) -> str | None:
    """Whitespace collapsed, clipped to PREVIEW_CHARS; None when nothing is left."""
    flat = " ".join(text.split())
    if not flat:
        return None
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
