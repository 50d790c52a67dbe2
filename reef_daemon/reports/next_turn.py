"""Signals from a session's next request: when a later request continues an earlier record, what follows the
earlier answer scores it. Rules with no model call run first, each a source of its own, each behind its setting (all
on by default): the user's words (`words_report`), a failed tool call (`tool_errors`), a test run that changed
colour (`red_green`). A later request that sends an earlier record's request again scores that answer as a `retry`;
one that goes on from a request its client cut off, as an `interruption`. With `reports.next-turn` on, the judge
model also ranks a retry's two answers against each other (a `judge` report on each, as `POST /reef/judge/group`),
and reads what the user said next that the words rules could not tell: accepted scores the deployment's best,
corrected and complained its worst, with the judge's reason; a neutral verdict gives no report. With
`reports.judge-votes` N the judge is asked N times (sampled) and the verdict more than half of them give counts;
without one, no report.

It runs beside the proxy, never in it: it reads the `record` events the store publishes after a commit, so a proxied
answer is never delayed or changed. It shares the daemon's process, so it also yields to traffic: it reads and judges
in the pauses between exchanges (QUIET_S without a new record), or after MAX_DEFER_S at the latest.

A later request is matched to the earlier record whose answer it carries (`turns.py`: the conversation up to that
answer, compared by fingerprint), so a regenerated answer, a shared opener or an invented history never moves a
score onto another record. The answers waiting for their next request, and the requests a retry may send again, are
kept within `reports.next-turn-memory` bytes; those let go for it, and the requests that continue no kept answer,
are counted. Each record gets at most one report per source (`derived_report`'s id).

Its bounds: the memory of answers (and, in a sixteenth of it, of which record gave which answer),
`reports.next-turn-max-chars` of a next message read, CUT_MEMORY bytes of cut requests, a short queue of turns
waiting for the judge (a turn that finds it full is not judged), `reports.judge-calls-per-minute`, and the judge's
own bounds on tokens and time. A turn whose judge is down, slow or answers with anything but a verdict gets no
report.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import time
from dataclasses import dataclass, field

from reef_contract import (
    INTERNAL_SCENARIOS,
    RECORD_EVENTS,
    SESSION_HEADER,
    TAG_HEADER_PREFIX,
    NextTurnStatus,
    ReportSource,
    StoredRecord,
)
from reef_daemon.errors import ReefError
from reef_daemon.events import EventBus, Subscription
from reef_daemon.records import ClientRecordDraft
from reef_daemon.reports.answered import Answered, AnsweredMemory
from reef_daemon.reports.derived import derived_report
from reef_daemon.reports.evidence import without_code
from reef_daemon.reports.group import SOURCE as GROUP_SOURCE
from reef_daemon.reports.group import judge_group
from reef_daemon.reports.interruption import interrupted, interruption_report
from reef_daemon.reports.judge import (
    NEXT_TURN_PROMPT,
    VOTE_TEMPERATURE,
    JudgeModel,
    majority,
    next_turn_question,
    parse_judgment,
    verdict_score,
)
from reef_daemon.reports.red_green import answers_between, previous_run, results_run, tests_report
from reef_daemon.reports.retry import retry_report
from reef_daemon.reports.tool_errors import tool_error_report
from reef_daemon.reports.turns import Reading, Turn, answer_text, next_turn, read_request
from reef_daemon.reports.words_report import words_report
from reef_daemon.settings import ReportsSection
from reef_daemon.store import Store

log = logging.getLogger("reef.judge")

SESSION_TAG = SESSION_HEADER.removeprefix(TAG_HEADER_PREFIX)
SOURCE: ReportSource = "next-turn"
WAITING_TURNS = 256  # turns waiting for the judge; one more is not judged
CUT_MEMORY = 64 * 1024  # bytes of the requests cut off by their client, waiting for the conversation to go on
# The share of reports.next-turn-memory that keeps which record gave which answer (still known once the answer is
# judged), for the answers a test run that changed colour scores together: 1 MiB of 16, about 3,000 answers.
PRODUCED_SHARE = 16
ASKED = b"asked:"  # the memory keeps a request a retry may send again under its prompt's key after this
# The judge yields to traffic: it works once no exchange was recorded for QUIET_S, or once a record or turn has
# waited MAX_DEFER_S (so steady traffic delays it, never starves it).
QUIET_S = 0.2
MAX_DEFER_S = 10.0


@dataclass(frozen=True)
class _Job:
    scenario: str
    earlier: Answered
    next_record_id: str
    next_message: str
    queued_at: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class _GroupJob:
    """A retry's two answers to one prompt, for the judge to rank against each other."""

    scenario: str
    record_ids: tuple[str, str]
    queued_at: float = field(default_factory=time.monotonic)


@dataclass
class SignalCounts:
    """What the signals and the judge did since the daemon started, for `GET /reef/status`, a benchmark and the
    log."""

    reports: collections.Counter[str] = field(default_factory=collections.Counter)
    turns: int = 0
    judged: int = 0
    neutral: int = 0
    no_judgment: int = 0
    not_the_user: int = 0
    over_bounds: int = 0
    scores_ignored: int = 0
    unmatched: int = 0
    forgotten: int = 0
    kept_bytes: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    last_failure: str | None = None

    def status(self) -> NextTurnStatus:
        """The counts as `GET /reef/status` answers them (`next_turn`)."""
        return {
            "reports": dict(self.reports),
            "turns": self.turns, "judged": self.judged, "neutral": self.neutral, "no_judgment": self.no_judgment,
            "over_bounds": self.over_bounds, "not_the_user": self.not_the_user,
            "scores_ignored": self.scores_ignored, "unmatched": self.unmatched,
            "forgotten": self.forgotten, "kept_bytes": self.kept_bytes,
            "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
            "last_failure": self.last_failure,
        }  # fmt: skip


class NextTurnSignals:
    """The signals from a session's next request; `judge` None: no judge model (reports.next-turn is off)."""

    def __init__(self, store: Store, bus: EventBus, judge: JudgeModel | None, settings: ReportsSection) -> None:
        self._store = store
        self._bus = bus
        self._judge = judge
        self._settings = settings
        produced = settings.next_turn_memory // PRODUCED_SHARE
        self._answered = AnsweredMemory(settings.next_turn_memory - produced)
        self._produced = AnsweredMemory(produced)
        self._cut = AnsweredMemory(CUT_MEMORY)
        self._records: asyncio.Queue[tuple[float, str]] = asyncio.Queue(maxsize=1024)
        self._last_record = 0.0  # when the last exchange was recorded (monotonic)
        self._jobs: asyncio.Queue[_Job | _GroupJob] = asyncio.Queue(maxsize=WAITING_TURNS)
        self._calls: collections.deque[float] = collections.deque()
        self._tasks: list[asyncio.Task[None]] = []
        self._subscription: Subscription | None = None
        self.counts = SignalCounts()

    def start(self) -> None:
        self._tasks = [asyncio.create_task(coro) for coro in (self._listen(), self._match())]
        if self._judge is not None:
            self._tasks.append(asyncio.create_task(self._judge_turns(self._judge)))

    def reconfigure(self, settings: ReportsSection) -> None:
        """Take the signals' and the judge's live settings from a reload."""
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
            except Exception:  # one odd record must not stop the signals
                log.exception("the next-turn signals could not read record %s", record_id)

    async def _match_one(self, record_id: str) -> None:
        record = await self._store.records.get(record_id)
        if record["type"] != "inference":
            return
        session = record["tags"].get(SESSION_TAG, "")
        seed = f"{record['scenario']}\n{session}"
        answer = record["answer"] if (record.get("status") or 0) < 400 else None
        # Reading a request is linear in its length, and off the loop: a long conversation never stalls traffic.
        reading = await asyncio.to_thread(read_request, seed, str(record["route"] or ""), record["request"], answer)
        if not reading.turns:
            return
        scenario = record["scenario"]
        if session:  # a request sent again, or after a cut, is told within a session only
            await self._repeated(scenario, record_id, reading)
        if reading.continued:
            await self._continue(scenario, record_id, reading)
        if reading.key is not None:
            shown = answer_text(answer)[-self._settings.judge_max_prompt_chars :]
            self.counts.forgotten += self._answered.keep(reading.key, Answered(record_id, shown, record.get("model")))
            self._produced.keep(reading.key, Answered(record_id, "", None))
        if session:
            self._keep_asked(record, record_id, reading.prefixes[-1])
        self.counts.kept_bytes = self._answered.bytes + self._cut.bytes + self._produced.bytes

    def _keep_asked(self, record: StoredRecord, record_id: str, prompt: bytes) -> None:
        """Keep the request for a retry that sends it again, or, when its client cut it off, for the request that
        goes on after it."""
        asked = Answered(record_id, "", None)
        if interrupted(record):
            self._cut.keep(prompt, asked)
        else:
            self.counts.forgotten += self._answered.keep(ASKED + prompt, asked)

    async def _repeated(self, scenario: str, record_id: str, reading: Reading) -> None:
        """Score the earlier request this one sends again (a retry) or goes on from after its client cut it off (an
        interruption)."""
        earlier = self._answered.take(ASKED + reading.prefixes[-1])
        if earlier is not None:
            await self._report(retry_report(scenario, earlier.record_id, record_id, self._settings))
            if self._judge is not None:  # the two answers to one prompt, ranked against each other
                self._queue(_GroupJob(scenario, (earlier.record_id, record_id)))
        if self._cut.bytes == 0:
            return
        for key in reversed(reading.prefixes):
            cut = self._cut.take(key)
            if cut is not None:
                await self._report(interruption_report(scenario, cut.record_id, record_id, self._settings))
                return

    async def _continue(self, scenario: str, record_id: str, reading: Reading) -> None:
        """Score the latest kept answer the request continues by what followed it; count a request that continues
        none (its answers were let go, never recorded here, or are not what the model answered)."""
        found = self._latest_kept(reading)
        if found is None:
            self.counts.unmatched += 1
            return
        earlier, at = found
        following = itertools.islice(reading.turns, at + 1, None)
        said = await asyncio.to_thread(next_turn, following, self._settings.next_turn_max_chars)
        if said.kind == "tool":
            await self._tool_results(scenario, earlier.record_id, record_id, reading, at)
        if said.kind != "user":
            self.counts.not_the_user += 1
            return
        words = words_report(scenario, earlier.record_id, record_id, said.text, self._settings)
        if words is not None:
            await self._report(words)
        elif self._judge is not None:
            self._queue(_Job(scenario, earlier, record_id, said.text))

    async def _tool_results(self, scenario: str, earlier_id: str, record_id: str, reading: Reading, at: int) -> None:
        """Score the answer at `at` by the results its tool calls got: a failed call; a test run that changed
        colour since the conversation's previous one, which scores every answer since that run too."""
        turns = reading.turns
        # Each result is read in linear time, and off the loop: many long results never stall traffic.
        results = await asyncio.to_thread(_results_after, turns, at)
        settings = self._settings
        failed = await asyncio.to_thread(tool_error_report, scenario, earlier_id, record_id, results, settings)
        await self._report(failed)
        if settings.tests != "on" or (now := await asyncio.to_thread(results_run, results)) is None:
            return
        previous = await asyncio.to_thread(previous_run, turns, at)
        if previous is None or previous[0] == now:
            return
        before, ran_at = previous
        for place in answers_between(turns, ran_at, at):
            between = earlier_id if place == at else self._answer_at(reading, place)
            if between is not None:
                await self._report(tests_report(scenario, between, record_id, before, now, settings))

    def _answer_at(self, reading: Reading, place: int) -> str | None:
        """The record whose answer is the assistant turn at `place` of the request; None when it is not known."""
        produced = self._produced.find(reading.prefixes[place])
        return produced.record_id if produced is not None else None

    async def _report(self, draft: ClientRecordDraft | None) -> bool:
        """Store a signal's report (None: the signal made none) and count it by its source; whether it was stored."""
        if draft is None:
            return False
        try:
            await self._store.records.append_client_record(draft)
        except ReefError as exc:  # the record's scenario was archived meanwhile, say
            log.info("no %s report on %s: %s", draft.source, draft.content["references"][0], exc.message)
            return False
        self.counts.reports[draft.source] += 1
        return True

    def _latest_kept(self, reading: Reading) -> tuple[Answered, int] | None:
        """The latest answer the request carries that is kept (no longer kept: it is judged once), and its place."""
        for key, at in reading.continued:
            earlier = self._answered.take(key)
            if earlier is not None:
                return earlier, at
        return None

    def _queue(self, job: _Job | _GroupJob) -> None:
        self.counts.turns += isinstance(job, _Job)
        try:
            self._jobs.put_nowait(job)
        except asyncio.QueueFull:
            self.counts.over_bounds += 1

    async def _judge_turns(self, judge: JudgeModel) -> None:
        while True:
            job = await self._jobs.get()
            await self._quiet(job.queued_at)
            try:
                if not self._within_rate():
                    self.counts.over_bounds += 1
                elif isinstance(job, _GroupJob):
                    await self._judge_group(judge, job)
                else:
                    await self._judge_one(judge, job)
            except Exception:
                log.exception("the next-turn judge failed on %s", job)
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
        """Whether a turn's calls (one per vote) fit in the minute's bound; if so they are counted in it."""
        now = time.monotonic()
        while self._calls and now - self._calls[0] >= 60.0:
            self._calls.popleft()
        votes = self._settings.judge_votes
        if len(self._calls) + votes > self._settings.judge_calls_per_minute:
            return False
        self._calls.extend([now] * votes)
        return True

    async def _judge_group(self, judge: JudgeModel, job: _GroupJob) -> None:
        """Rank a retry's two answers against each other; each gets a `judge` report (the retried one keeps its
        `retry` report beside it)."""
        records = [await self._store.records.get(record_id) for record_id in job.record_ids]
        if any(record.get("answer") is None for record in records):
            return
        ranked = await judge_group(self._store, judge, self._settings, job.scenario, records)
        if ranked["judged"]:
            self.counts.judged += 1
            self.counts.reports[GROUP_SOURCE] += sum(1 for score in ranked["scores"] if score["created"])
        else:
            self.counts.no_judgment += 1
            self.counts.last_failure = ranked["reason"]

    async def _judge_one(self, judge: JudgeModel, job: _Job) -> None:
        question = next_turn_question(job.earlier.answer, job.next_message, self._settings.judge_max_prompt_chars)
        tags = {"judged": job.earlier.record_id, "judge": SOURCE}
        votes = self._settings.judge_votes
        temperature = VOTE_TEMPERATURE if votes > 1 else 0.0
        asked = [
            judge.ask(NEXT_TURN_PROMPT, question, model=job.earlier.model, tags=tags, temperature=temperature)
            for _ in range(votes)
        ]
        calls = await asyncio.gather(*asked)
        judgments = [parse_judgment(call.text) for call in calls]
        self.counts.input_tokens += sum(call.input_tokens for call in calls)
        self.counts.output_tokens += sum(call.output_tokens for call in calls)
        self.counts.scores_ignored += sum(1 for found in judgments if found is not None and found.score_ignored)
        judgment = majority(judgments)
        if judgment is None:
            self.counts.no_judgment += 1
            failures = [call.failure for call in calls if call.failure]
            self.counts.last_failure = (
                failures[0] if failures else "the judge's answers held no verdict with a majority"
            )
            return
        score = verdict_score(judgment.verdict, self._settings.score_min, self._settings.score_max)
        if score is None:
            self.counts.neutral += 1
            return
        evidence = {
            "verdict": judgment.verdict,
            "votes": dict(collections.Counter(j.verdict if j else "none" for j in judgments)),
            "next_record": job.next_record_id,
            "next_message": without_code(job.next_message),
            "judge_model": judge.model or job.earlier.model,
            "judge_record": calls[judgments.index(judgment)].record_id,
        }
        draft = derived_report(job.scenario, job.earlier.record_id, SOURCE, score, judgment.reason, evidence)
        if await self._report(draft):
            self.counts.judged += 1
        else:
            self.counts.no_judgment += 1


def _results_after(turns: list[Turn], at: int) -> list[Turn]:
    """The turns after the answer at `at` up to the next assistant turn: its tool calls' results (and what else
    came before the next answer)."""
    return list(itertools.takewhile(lambda turn: turn.role != "assistant", itertools.islice(turns, at + 1, None)))
