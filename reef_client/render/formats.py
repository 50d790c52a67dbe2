"""Small formatters shared by the tables: times, latencies, token counts, scores, routes."""

from __future__ import annotations

import time
from typing import Any

from reef_contract import SOURCE_MARKS, report_source

MISSING = "-"


def clock(epoch: float | None) -> str:
    """HH:MM:SS for today, else the date (Jan 05)."""
    if epoch is None:
        return MISSING
    moment = time.localtime(epoch)
    if time.strftime("%Y-%m-%d", moment) == time.strftime("%Y-%m-%d"):
        return time.strftime("%H:%M:%S", moment)
    return time.strftime("%b %d", moment)


def timestamp(epoch: float | None) -> str:
    """The full local date and time."""
    return MISSING if epoch is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def latency(ms: float | None) -> str:
    """Milliseconds below a second, seconds above."""
    if ms is None:
        return MISSING
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def tokens(usage: dict[str, Any] | None) -> str:
    """`input→output`, each `-` when unknown."""
    usage = usage or {}
    inputs, outputs = usage.get("input_tokens"), usage.get("output_tokens")
    if inputs is None and outputs is None:
        return MISSING
    return f"{MISSING if inputs is None else inputs}→{MISSING if outputs is None else outputs}"


def score(value: float | None) -> str:
    """A score as short as it can be written; `-` when unscored."""
    if value is None:
        return MISSING
    return f"{value:g}"


def sourced_score(value: float | None, source: str | None) -> str:
    """A score with its source's letter when it was derived, not given by a person: `0 w` (the user's words),
    `0 r` (a retry), `0 c` (a cut stream), `0 e` (a tool error), `1 t` (tests went green), `0.8 n` (the next turn),
    `1 o` (what became of the code), `0.2 j` (a judge), `1 i` (an import)."""
    known = report_source(source) if source else None
    mark = SOURCE_MARKS[known] if known is not None and value is not None else ""
    return f"{score(value)} {mark}" if mark else score(value)


def route(path: str | None, record_type: str) -> str:
    """The API a record used, short: chat, responses, messages, count_tokens; or the record type."""
    if path is None:
        return record_type
    short = path.removeprefix("/v1/")
    return {"chat/completions": "chat", "messages/count_tokens": "count_tokens"}.get(short, short)


def duration(seconds: float | None) -> str:
    """An uptime: 45s, 12m 3s, 5h 2m, 3d 4h."""
    if seconds is None:
        return MISSING
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"
