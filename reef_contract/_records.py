"""Records: GET /reef/records, GET /reef/records/{id}, POST /reef/report, and records in and out
(POST /reef/records/batch, GET /reef/export)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal, NotRequired, TypedDict

from reef_contract._routes import COUNT_TOKENS_ROUTE
from reef_contract._scenarios import INTERNAL_SCENARIOS

# What a record is: an exchange with the model, a report scoring exchanges, or a person's change request.
RecordType = Literal["inference", "report", "request"]
RECORD_TYPES: Final[tuple[RecordType, ...]] = ("inference", "report", "request")
# The records a client sends with content of its own (POST /reef/report, POST /reef/requests).
ClientRecordType = Literal["report", "request"]
# Record types by the names they had before (a change request was `train`): a query may still give them.
RECORD_TYPE_ALIASES: Final[Mapping[str, RecordType]] = {"train": "request"}


# Where a report came from: a person (the default), or derived with no person: by rules with no model call, from
# the user's next message (`words`), the same request sent again (`retry`), a stream the user cut off
# (`interruption`), a tool call that failed (`tool-error`) or a test run that changed colour (`tests`); from the
# user's next message read by a judge model (`next-turn`), a judge model's ranking (`judge`), what became of the code
# (`outcome`), or a score carried by an imported conversation (`import`). A person's report always wins over a
# derived one for the same record.
ReportSource = Literal[
    "person", "words", "retry", "interruption", "tool-error", "tests", "next-turn", "judge", "outcome", "import"
]
REPORT_SOURCES: Final[tuple[ReportSource, ...]] = (
    "person", "words", "retry", "interruption", "tool-error", "tests", "next-turn", "judge", "outcome", "import",
)  # fmt: skip
PERSON_SOURCE: Final[ReportSource] = "person"
# The order in which a record's scores from several sources count: the first one present is the record's score.
SOURCE_PRECEDENCE: Final[tuple[ReportSource, ...]] = (
    "person", "import", "outcome", "tests", "tool-error", "words", "retry", "interruption", "judge", "next-turn",
)  # fmt: skip
# `reef records` and the TUI mark a derived score with its source's letter (a person's score has none).
SOURCE_MARKS: Final[Mapping[ReportSource, str]] = {
    "person": "", "words": "w", "retry": "r", "interruption": "c", "tool-error": "e", "tests": "t", "next-turn": "n",
    "judge": "j", "outcome": "o", "import": "i",
}  # fmt: skip


def report_source(name: str) -> ReportSource | None:
    """The report source a name stands for; None when it names none."""
    for known in REPORT_SOURCES:
        if name == known:
            return known
    return None


def record_type(name: str) -> RecordType | None:
    """The record type a name stands for, its own or an old one; None when it names none."""
    for known in RECORD_TYPES:
        if name == known:
            return known
    return RECORD_TYPE_ALIASES.get(name)


def awaits_score(row: RecordRow, scenario: str | None = None) -> bool:
    """Whether a record is one a person still has to score, in a list filtered on `scenario` (None: all). A token
    count (count_tokens) has no answer to score."""
    unscored = row["type"] == "inference" and row["score"] is None and row["route"] != COUNT_TOKENS_ROUTE
    return unscored and (scenario is not None or row["scenario"] not in INTERNAL_SCENARIOS)


class Usage(TypedDict):
    """Token counts of an exchange; None where the API did not say."""

    input_tokens: int | None
    output_tokens: int | None


# The answer of an inference record, assembled once when the daemon records the exchange.
class TextPart(TypedDict):
    type: Literal["text"]
    text: str


class ThinkingPart(TypedDict):
    type: Literal["thinking"]
    text: str


class ToolCallPart(TypedDict):
    """A call of a tool; `arguments` is the JSON text the model wrote (partial when its stream was cut)."""

    type: Literal["tool_call"]
    id: str | None
    name: str | None
    arguments: str


class OtherPart(TypedDict):
    """Output the answer keeps only the kind of (an image, a server tool's call, redacted thinking)."""

    type: Literal["other"]
    kind: str


AnswerPart = TextPart | ThinkingPart | ToolCallPart | OtherPart


class Answer(TypedDict):
    """The assistant's final message, the same for every API and for streamed or buffered answers: assembled once,
    when the daemon records the exchange, and served as `answer` in `GET /reef/records/{id}`.

    `finish_reason` is in the API's own words: chat's `finish_reason` (stop, length, tool_calls), messages'
    `stop_reason` (end_turn, max_tokens, tool_use), responses' `status` or its incomplete reason.
    """

    model: str | None
    parts: list[AnswerPart]
    finish_reason: str | None
    usage: Usage


class RecordPreview(TypedDict):
    """The first words of an exchange, for lists: the last user message and the start of the answer, each one
    line and at most PREVIEW_CHARS long; None when the exchange has none (an error, a tool result only)."""

    asked: str | None
    answered: str | None


PREVIEW_CHARS: Final = 200


class RecordRow(TypedDict):
    """A record as `GET /reef/records` lists it and `record`, `report` and `request` events announce it.
    Inference records stored with words to show carry `preview`. `source` is, for a report, where it came from;
    for an inference record, where the score it shows came from (None while unscored)."""

    sequence: int
    id: str
    scenario: str
    type: RecordType
    created_at: float
    route: str | None
    model: str | None
    status: int | None
    complete: bool | None
    duration_ms: float | None
    usage: Usage
    score: float | None
    source: ReportSource | None
    release: str | None
    preview: NotRequired[RecordPreview]


class RecordPage(TypedDict):
    """A page of `GET /reef/records`, with the cursors of the pages after and before it."""

    records: list[RecordRow]
    next_after: int | None
    next_before: int | None


class Timings(TypedDict):
    """How long an exchange took, in milliseconds; None for records that are not exchanges."""

    ttft_ms: float | None
    duration_ms: float | None
    overhead_ms: float | None  # reef's own time up to the record's commit; the answer's x-reef-overhead-ms adds
    # the commit itself (group commit: the wait for the disk, shared by the exchanges of one batch)


class TokenData(TypedDict):
    """Token ids, log-probs and weight versions of an answer the embedded model generated."""

    prompt_ids: list[int]
    output_ids: list[int]
    logprobs: list[float]
    versions: list[str]
    adapters: NotRequired[list[str | None]]  # the scenario whose LoRA adapter served each token; None: the base
    cut: NotRequired[str]  # which of reef's bounds ended an answer the model had not ended (cap, time, loop)


class RecordContent(TypedDict, total=False):
    """What a record carries besides its row: the embedded model's token data, and the content a client sent with
    a report (references, score, feedback, metadata; a derived report's `evidence`: what it was derived from, never
    the user's code) or a change request (text, session, release_id, client)."""

    tokens: TokenData
    references: list[str]
    evidence: dict[str, Any]
    feedback: str | dict[str, Any]
    metadata: dict[str, Any]
    text: str
    session: str
    release_id: str
    client: dict[str, Any]


class StoredRecord(RecordRow, RecordContent):
    """A record in full: the row, its timings, the exchange's bodies (JSON, or text when they are not JSON), its
    tags, and its content."""

    timings: Timings
    request: Any
    response: Any
    answer: Answer | None
    error: str | None
    tags: dict[str, str]


class JudgedRecord(StoredRecord):
    """A record in full with what the recipe made of it: the step that consumed it, or why it never will."""

    consumed_by_step: int | None
    ineligible: str | None


class RecordDetail(JudgedRecord):
    """`GET /reef/records/{id}`: the record and the reports that reference it, oldest first, and what the exchange
    cost in USD by the price table (telemetry.prices); `cost_usd` None: its model has no price, or no tokens were
    counted (not a cost of 0)."""

    reports: list[JudgedRecord]
    cost_usd: float | None


class ReportAck(TypedDict):
    """`POST /reef/report`: the report's id and scenario, and whether it was new (False for a retry)."""

    agent_record_id: str
    scenario: str
    request_type: Literal["report"]
    created: bool


class GroupRequest(TypedDict):
    """`POST /reef/judge/group`: inference records of the scenario that answered the same prompt (2 to 8)."""

    references: list[str]


class GroupScore(TypedDict):
    """One record's place in its group: its score on the scale, the judge's reason, its `judge` report (created
    False when the record had one already, which stays)."""

    id: str
    score: float
    reason: str
    report_id: str
    created: bool


class GroupAnswer(TypedDict):
    """`POST /reef/judge/group`: one score per record in the order sent, or none when the judge gave no usable
    ranking (`judged` False, `reason` says why; no report is stored)."""

    scenario: str
    judged: bool
    reason: str | None
    scores: list[GroupScore]


MAX_GROUP: Final = 8  # larger groups confuse a judge (RULER's advice: 4 to 8)


# The tag an imported record carries, naming the format it came from (openai, claude-code, codex, pi).
IMPORTED_TAG: Final = "imported"
EXPORT_FORMATS: Final = ("openai", "preference", "tokens")
# The most conversations one `POST /reef/records/batch` takes.
MAX_BATCH: Final = 1000
# The content parts an imported message may hold: text (an image or any other part is refused, not dropped).
IMPORT_TEXT_PARTS: Final = ("text", "input_text", "output_text")


def import_part_problem(where: str, part: Any) -> str | None:
    """Why the content part at `where` (`messages[0].content[1]`) cannot be imported, or None for a text part."""
    kind = part.get("type") if isinstance(part, dict) else None
    if isinstance(kind, str) and kind in IMPORT_TEXT_PARTS and isinstance(part.get("text"), str):
        return None
    named = f"a {kind} part" if isinstance(kind, str) else "not a text part"
    return f"{where} is {named}; reef imports text parts only ({', '.join(IMPORT_TEXT_PARTS)})"


class ImportConversation(TypedDict):
    """One conversation of `POST /reef/records/batch`: chat messages ending with the assistant's answer, and what
    is known of it. `format` names where it came from; `created_at` is the original time (epoch seconds)."""

    messages: list[dict[str, Any]]
    format: NotRequired[str]
    model: NotRequired[str]
    tools: NotRequired[list[dict[str, Any]]]
    created_at: NotRequired[float]
    duration_ms: NotRequired[float]
    session: NotRequired[str]
    score: NotRequired[float]
    feedback: NotRequired[str | dict[str, Any]]


class ImportResult(TypedDict):
    """What became of one conversation of a batch, by its index: imported (a new record, and a report when it
    carried a score or feedback), duplicate (its content is already stored, as `id`) or refused (`reason`)."""

    index: int
    status: Literal["imported", "duplicate", "refused"]
    id: str | None
    report_id: str | None
    reason: str | None


class BatchAck(TypedDict):
    """`POST /reef/records/batch`: one result per conversation, and the counts."""

    scenario: str
    results: list[ImportResult]
    imported: int
    duplicate: int
    refused: int
