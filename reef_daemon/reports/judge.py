"""The judge: a model asked, over chat completions, what a user's next message says of the answer before it, or how
several answers to one prompt rank against each other (one call, relative scores, as RULER does).

The judge is the served model (through the daemon's runtime) or an endpoint of its own (`reports.judge-url`, its key
from REEF_JUDGE_API_KEY). Every call it answers is recorded under the scenario `reef-judge`, so what judging costs is
seen as any other traffic is. Its output is untrusted: anything but the verdict words, or a score outside 0..1, is
no judgment at all, and the caller stores nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp

from reef_daemon.contract import CHAT_ROUTE, JUDGE_SCENARIO
from reef_daemon.errors import UpstreamFailed
from reef_daemon.ids import new_record_id
from reef_daemon.records import InferenceDraft
from reef_daemon.runtimes.base import Runtime
from reef_daemon.settings import ReportsSection

log = logging.getLogger("reef.judge")

Verdict = Literal["accepted", "corrected", "complained", "neutral"]
# Where each verdict sits on the scale, from its worst (0) to its best (1).
VERDICT_PLACES: dict[Verdict, float] = {"accepted": 1.0, "neutral": 0.5, "corrected": 0.2, "complained": 0.0}
REASON_CHARS = 200
_OBJECT = re.compile(r"\{[^{}]*\}|\{.*\}", re.DOTALL)

NEXT_TURN_PROMPT = """You judge one reply of an AI assistant by what the user wrote next.
Decide how the user took the reply:
- accepted: the user moves on to the next step, thanks the assistant, or builds on the reply;
- corrected: the user points out a mistake, says what they meant instead, repeats or rephrases the request, or asks
  for the reply to be redone or changed (a change request is a correction);
- complained: the user is unhappy with the reply without saying how to fix it;
- neutral: the next message says nothing about the reply (another subject, or unclear).
Answer with one JSON object and nothing else: {"verdict": "accepted|corrected|complained|neutral", "reason": "one
short sentence"}. You may add "score": a number from 0 (worst) to 1 (best)."""

GROUP_PROMPT = """Below are several attempts at the same task, each given the same conversation. Score each attempt
from 0 (worst) to 1 (best) against the others. An attempt that reaches the goal must score clearly higher than one
that does not; a shorter path to the same result beats a longer one; the gaps between scores should match the gaps in
quality; partial progress earns partial credit.
Answer with one JSON object and nothing else: {"scores": [{"id": 1, "score": 0.0, "reason": "one short sentence"},
...]}, one entry per attempt."""


@dataclass(frozen=True)
class Judgment:
    """A verdict on one answer, with the place on the scale (0..1) it gives and the judge's reason."""

    verdict: Verdict
    place: float
    reason: str


@dataclass(frozen=True)
class Ranked:
    """One attempt's place among its group (0..1) and the judge's reason."""

    place: float
    reason: str


@dataclass(frozen=True)
class JudgeCall:
    """What one judge call gave: its answer's text (None when it gave none) and the record it was stored as."""

    text: str | None
    record_id: str | None
    input_tokens: int
    output_tokens: int
    failure: str | None = None  # why it gave no text: no answer, or the judge's HTTP status


Record = Callable[[InferenceDraft], Awaitable[None]]


class JudgeModel:
    """Sends the judge's chat completions to the served model or the judge endpoint, bounded in tokens and time,
    and records each answered call under `reef-judge`."""

    def __init__(self, settings: ReportsSection, runtime: Runtime, record: Record, served_model: str | None) -> None:
        self._settings = settings
        self._runtime = runtime
        self._record = record
        self._served_model = served_model
        self._session: aiohttp.ClientSession | None = None

    def reconfigure(self, settings: ReportsSection) -> None:
        self._settings = settings

    @property
    def model(self) -> str | None:
        return self._settings.judge_model or self._served_model

    async def ask(self, system: str, user: str, *, model: str | None = None, tags: dict[str, str]) -> JudgeCall:
        """One call; the text of its answer, or None when the judge is down, slow or answers with no text."""
        payload: dict[str, Any] = {
            "model": self.model or model or "default",
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "max_tokens": self._settings.judge_max_tokens,
            "temperature": 0.0,
            "stream": False,
        }
        body = json.dumps(payload).encode()
        started = time.time()
        try:
            status, raw = await asyncio.wait_for(self._send(body, payload), self._settings.judge_timeout_s)
        except (TimeoutError, UpstreamFailed, aiohttp.ClientError, OSError) as exc:
            log.info("the judge gave no answer: %s", type(exc).__name__)
            return JudgeCall(None, None, 0, 0, f"{self._where()} gave no answer ({type(exc).__name__})")
        duration_ms = (time.time() - started) * 1000
        record_id = new_record_id()
        draft = InferenceDraft(
            record_id, JUDGE_SCENARIO, CHAT_ROUTE, started, str(payload["model"]), body, status, raw, False, True,
            None if status < 400 else f"the judge answered {status}", None, duration_ms, None, tags,
        )  # fmt: skip
        await self._record(draft)
        text, used = _completion_text(raw) if status == 200 else (None, {})
        failure = None if status == 200 else f"{self._where()} answered HTTP {status}"
        tokens = int(used.get("prompt_tokens") or 0), int(used.get("completion_tokens") or 0)
        return JudgeCall(text, record_id, *tokens, failure)

    def _where(self) -> str:
        """The judge as a failure names it: the URL posted to, or the served model."""
        url = self._settings.judge_url
        return "the served model" if url is None else f"the judge at {url}{CHAT_ROUTE}"

    async def _send(self, body: bytes, payload: dict[str, Any]) -> tuple[int, bytes]:
        url = self._settings.judge_url
        headers = {"content-type": "application/json"}
        if url is None:
            served = await self._runtime.send(CHAT_ROUTE, body, payload, headers)
            try:
                return served.status, await served.read()
            finally:
                await served.close()
        if self._settings.judge_api_key:
            headers["authorization"] = f"Bearer {self._settings.judge_api_key}"
        if self._session is None:
            self._session = aiohttp.ClientSession()
        async with self._session.post(url + CHAT_ROUTE, data=body, headers=headers) as response:
            return response.status, await response.read()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def next_turn_question(answer: str, next_message: str, max_chars: int) -> str:
    """The judge's user message: the reply and what the user wrote next, each bounded (the reply keeps its end,
    where it concluded; the next message its start)."""
    half = max(200, max_chars // 2)
    reply = answer if len(answer) <= half else "…" + answer[-half:]
    said = next_message if len(next_message) <= half else next_message[:half] + "…"
    return f"<assistant_reply>\n{reply}\n</assistant_reply>\n<user_next_message>\n{said}\n</user_next_message>"


def parse_judgment(text: str | None) -> Judgment | None:
    """The judge's verdict, or None for anything else: no JSON object, an unknown verdict, a score off 0..1."""
    found = _last_object(text)
    if found is None:
        return None
    verdict = found.get("verdict")
    if not isinstance(verdict, str) or verdict.strip().lower() not in VERDICT_PLACES:
        return None
    known: Verdict = next(v for v in VERDICT_PLACES if v == verdict.strip().lower())
    place = _place(found.get("score", VERDICT_PLACES[known]))
    if place is None:
        return None
    return Judgment(known, place, _reason(found.get("reason")))


def group_question(context: str, attempts: list[str], max_chars: int) -> str:
    """The judge's user message for a group: the shared conversation once, then each attempt by number."""
    share = max(200, max_chars // (len(attempts) + 1))
    parts = [f"<context>\n{context[-share:]}\n</context>", "Attempts:"]
    parts += [f'<attempt id="{n}">\n{text[:share]}\n</attempt>' for n, text in enumerate(attempts, start=1)]
    return "\n".join(parts)


def parse_ranking(text: str | None, size: int) -> list[Ranked] | None:
    """One place (0..1) per attempt, in the attempts' order; None unless every attempt got exactly one."""
    found = _last_object(text)
    scores = found.get("scores") if found else None
    if not isinstance(scores, list) or len(scores) != size:
        return None
    ranked: dict[int, Ranked] = {}
    for entry in scores:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), int):
            return None
        place = _place(entry.get("score"))
        if place is None or entry["id"] in ranked or not 1 <= entry["id"] <= size:
            return None
        ranked[entry["id"]] = Ranked(place, _reason(entry.get("reason")))
    return [ranked[n] for n in range(1, size + 1)]


Ask = Callable[[str, str], Awaitable[str | None]]


async def rank_group(ask: Ask, context: str, attempts: list[str], *, max_chars: int = 12000) -> list[Ranked] | None:
    """Rank attempts at one task against each other in one judge call (RULER's way): one place (0 worst, 1 best)
    per attempt, in the attempts' order; None when the judge gave no usable ranking (a wrong count, a score off
    0..1). Identical attempts are asked about once and share its place, though alone it says nothing relative.

    `ask(system, user)` is the judge: it returns the answer's text, or None when it gave none. A recipe passes its
    own model (the gate's judge), GRPO's rewards come from `POST /reef/judge/group` through the daemon's judge."""
    distinct = list(dict.fromkeys(attempts))
    if len(distinct) < 2:
        return None
    ranked = parse_ranking(await ask(GROUP_PROMPT, group_question(context, distinct, max_chars)), len(distinct))
    if ranked is None:
        return None
    by_text = dict(zip(distinct, ranked, strict=True))
    return [by_text[text] for text in attempts]


def on_scale(place: float, low: float, high: float) -> float:
    """A place from 0 (worst) to 1 (best) as a score on the deployment's scale."""
    return low + max(0.0, min(1.0, place)) * (high - low)


def _place(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if 0.0 <= number <= 1.0 else None


def _reason(value: Any) -> str:
    text = " ".join(str(value or "").split())
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def _last_object(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    for match in reversed(_OBJECT.findall(text)):
        try:
            found = json.loads(match)
        except ValueError:
            continue
        if isinstance(found, dict):
            return found
    return None


def _completion_text(raw: bytes) -> tuple[str | None, dict[str, Any]]:
    try:
        answer = json.loads(raw)
        text = answer["choices"][0]["message"]["content"]
        usage = answer.get("usage") or {}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None, {}
    return (text if isinstance(text, str) else None), (usage if isinstance(usage, dict) else {})
