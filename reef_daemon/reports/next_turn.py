"""The next-turn judge: when a session's later request continues an earlier record, the judge reads what the user
said next and the earlier answer gets a `next-turn` report (accepted, corrected, complained or neutral, its reason,
a score on the deployment's scale).

It runs beside the proxy, never in it: it reads the `record` events the store publishes after a commit, so a proxied
answer is never delayed or changed. It shares the daemon's process, so it also yields to traffic: it reads and judges
in the pauses between exchanges (QUIET_S without a new record), or after MAX_DEFER_S at the latest.

Its bounds: a short queue of turns waiting for the judge (a turn that finds it full is not judged),
`reports.judge-calls-per-minute`, and the judge's own bounds on tokens and time. A turn whose judge is down, slow or
answers with anything but a verdict gets no report.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from dataclasses import dataclass, field

from reef_daemon.contract import (
    INTERNAL_SCENARIOS,
    RECORD_EVENTS,
    SESSION_HEADER,
    TAG_HEADER_PREFIX,
    NextTurnStatus,
    ReportSource,
)
from reef_daemon.errors import ReefError
from reef_daemon.events import EventBus, Subscription
from reef_daemon.reports.derived import derived_report
from reef_daemon.reports.judge import NEXT_TURN_PROMPT, JudgeModel, next_turn_question, on_scale, parse_judgment
from reef_daemon.reports.turns import answer_text, continuation, request_turns, without_code
from reef_daemon.settings import ReportsSection
from reef_daemon.store import Store

log = logging.getLogger("reef.judge")

SESSION_TAG = SESSION_HEADER.removeprefix(TAG_HEADER_PREFIX)
SOURCE: ReportSource = "next-turn"
WAITING_TURNS = 256  # turns waiting for the judge; one more is not judged
KEPT_SESSIONS = 512  # sessions whose last answers are kept to match their next request against
KEPT_TURNS = 4  # answers kept per session (an agent's side calls interleave with its main turns)
SESSION_IDLE_S = 3600.0
# The judge yields to traffic: it works once no exchange was recorded for QUIET_S, or once a record or turn has
# waited MAX_DEFER_S (so steady traffic delays it, never starves it).
QUIET_S = 0.2
MAX_DEFER_S = 10.0


@dataclass
class _Answered:
    """An answer waiting for the session's next request: its request's turns by fingerprint (not their text), and
    the end of the answer, as much as the judge is shown."""

    record_id: str
    turns: list[str]
    answer: str
    model: str | None


@dataclass
class _Session:
    answered: collections.deque[_Answered] = field(default_factory=lambda: collections.deque(maxlen=KEPT_TURNS))
    seen_at: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class _Job:
    scenario: str
    earlier: _Answered
    next_record_id: str
    next_message: str
    queued_at: float = field(default_factory=time.monotonic)


@dataclass
class JudgeCounts:
    """What the judge did since the daemon started, for `GET /reef/status`, a benchmark and the log."""

    turns: int = 0
    judged: int = 0
    no_judgment: int = 0
    not_the_user: int = 0
    over_bounds: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    last_failure: str | None = None

    def status(self) -> NextTurnStatus:
        """The counts as `GET /reef/status` answers them (`next_turn`)."""
        return {
            "turns": self.turns, "judged": self.judged, "no_judgment": self.no_judgment,
            "over_bounds": self.over_bounds, "not_the_user": self.not_the_user,
            "input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "last_failure": self.last_failure,
        }  # fmt: skip


class NextTurnJudge:
    def __init__(self, store: Store, bus: EventBus, judge: JudgeModel, settings: ReportsSection) -> None:
        self._store = store
        self._bus = bus
        self._judge = judge
        self._settings = settings
        self._sessions: collections.OrderedDict[tuple[str, str], _Session] = collections.OrderedDict()
        self._records: asyncio.Queue[tuple[float, str]] = asyncio.Queue(maxsize=1024)
        self._last_record = 0.0  # when the last exchange was recorded (monotonic)
        self._jobs: asyncio.Queue[_Job] = asyncio.Queue(maxsize=WAITING_TURNS)
        self._calls: collections.deque[float] = collections.deque()
        self._tasks: list[asyncio.Task[None]] = []
        self._subscription: Subscription | None = None
        self.counts = JudgeCounts()

    def start(self) -> None:
        self._tasks = [asyncio.create_task(coro) for coro in (self._listen(), self._match(), self._judge_turns())]

    def reconfigure(self, settings: ReportsSection) -> None:
        """Take the judge's live settings from a reload."""
        self._settings = settings

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._subscription is not None:
            self._subscription.close()

    async def _listen(self) -> None:
        while True:
            self._subscription = subscription = self._bus.subscribe(types=(RECORD_EVENTS["inference"],))
            while (event := await subscription.next()) is not None:
                if event.scenario in INTERNAL_SCENARIOS:
                    continue
                self._last_record = time.monotonic()
                row = event.data.get("record")
                if isinstance(row, dict) and (row.get("status") or 0) < 400:
                    with contextlib.suppress(asyncio.QueueFull):  # falling behind: those turns go unjudged
                        self._records.put_nowait((self._last_record, str(row["id"])))

    async def _match(self) -> None:
        while True:
            seen_at, record_id = await self._records.get()
            await self._quiet(seen_at)
            try:
                await self._match_one(record_id)
            except Exception:  # one odd record must not stop the judge
                log.exception("the next-turn judge could not read record %s", record_id)

    async def _match_one(self, record_id: str) -> None:
        record = await self._store.records.get(record_id)
        if record["type"] != "inference":
            return
        turns = request_turns(str(record["route"] or ""), record["request"])
        if not turns:
            return
        key = (record["scenario"], str(record["tags"].get(SESSION_TAG, "")))
        session = self._session(key)
        for earlier in list(session.answered):
            following = continuation(earlier.turns, turns)
            if following is None:
                continue
            session.answered.remove(earlier)
            if following.kind != "user":
                self.counts.not_the_user += 1
            else:
                self._queue(_Job(record["scenario"], earlier, record_id, following.text))
            break
        if record.get("answer") is not None and (record.get("status") or 0) < 400:
            answer = answer_text(record["answer"])[-self._settings.judge_max_prompt_chars :]
            fingerprints = [turn.fingerprint for turn in turns]
            session.answered.append(_Answered(record_id, fingerprints, answer, record.get("model")))

    def _session(self, key: tuple[str, str]) -> _Session:
        now = time.monotonic()
        session = self._sessions.pop(key, None)
        if session is None or now - session.seen_at > SESSION_IDLE_S:
            session = _Session()
        session.seen_at = now
        self._sessions[key] = session
        while len(self._sessions) > KEPT_SESSIONS:
            self._sessions.popitem(last=False)
        return session

    def _queue(self, job: _Job) -> None:
        self.counts.turns += 1
        try:
            self._jobs.put_nowait(job)
        except asyncio.QueueFull:
            self.counts.over_bounds += 1

    async def _judge_turns(self) -> None:
        while True:
            job = await self._jobs.get()
            await self._quiet(job.queued_at)
            try:
                if self._within_rate():
                    await self._judge_one(job)
                else:
                    self.counts.over_bounds += 1
            except Exception:
                log.exception("the next-turn judge failed on record %s", job.earlier.record_id)
                self.counts.no_judgment += 1

    async def _quiet(self, since: float) -> None:
        """Wait for a pause in the traffic, or until what waits has waited MAX_DEFER_S since `since`."""
        while True:
            now = time.monotonic()
            pause = QUIET_S - (now - self._last_record)
            if pause <= 0 or now - since >= MAX_DEFER_S:
                return
            await asyncio.sleep(min(pause, MAX_DEFER_S - (now - since)))

    def _within_rate(self) -> bool:
        now = time.monotonic()
        while self._calls and now - self._calls[0] >= 60.0:
            self._calls.popleft()
        if len(self._calls) >= self._settings.judge_calls_per_minute:
            return False
        self._calls.append(now)
        return True

    async def _judge_one(self, job: _Job) -> None:
        question = next_turn_question(job.earlier.answer, job.next_message, self._settings.judge_max_prompt_chars)
        tags = {"judged": job.earlier.record_id, "judge": SOURCE}
        call = await self._judge.ask(NEXT_TURN_PROMPT, question, model=job.earlier.model, tags=tags)
        self.counts.input_tokens += call.input_tokens
        self.counts.output_tokens += call.output_tokens
        judgment = parse_judgment(call.text)
        if judgment is None:
            self.counts.no_judgment += 1
            self.counts.last_failure = call.failure or "the judge's answer held no verdict"
            return
        score = on_scale(judgment.place, self._settings.score_min, self._settings.score_max)
        evidence = {
            "verdict": judgment.verdict,
            "next_record": job.next_record_id,
            "next_message": without_code(job.next_message),
            "judge_model": self._judge.model or job.earlier.model,
            "judge_record": call.record_id,
        }
        draft = derived_report(job.scenario, job.earlier.record_id, SOURCE, score, judgment.reason, evidence)
        try:
            await self._store.records.append_client_record(draft)
        except ReefError as exc:  # the record's scenario was archived meanwhile, say
            log.info("no next-turn report on %s: %s", job.earlier.record_id, exc.message)
            self.counts.no_judgment += 1
            return
        self.counts.judged += 1
