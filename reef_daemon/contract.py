"""The wire contract: what the daemon and its clients (CLI, TUI, adapter wrappers) agree on.

Header and environment variable names, the default address and state folder, route paths, and the shapes of the
JSON the daemon answers with. Importable without aiohttp or torch, so every client can depend on it; a change of the
API's shape is made here and mypy finds every place that must follow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal, NotRequired, TypedDict

# --- addresses and folders ------------------------------------------------------------------------------------
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8900
DEFAULT_URL: Final = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"
# Where a daemon started in a directory keeps its records, releases and pid file (relative to that directory).
DEFAULT_STATE_DIR: Final = Path(".reef")

# --- headers ----------------------------------------------------------------------------------------------------
# Header names are lower-case, as the proxy compares them. Every header of reef's own starts with the prefix: the
# proxy never forwards one upstream nor relays one from upstream.
REEF_HEADER_PREFIX: Final = "x-reef-"
SCENARIO_HEADER: Final = "x-reef-scenario"
RECEIPT_HEADER: Final = "x-reef-agent-record-id"
OVERHEAD_HEADER: Final = "x-reef-overhead-ms"
TAG_HEADER_PREFIX: Final = "x-reef-tag-"
SESSION_HEADER: Final = f"{TAG_HEADER_PREFIX}session"
RELEASE_HEADER: Final = f"{TAG_HEADER_PREFIX}release"
INSTALL_ERROR_HEADER: Final = "x-reef-install-error"

# --- environment variables --------------------------------------------------------------------------------------
URL_ENV: Final = "REEF_URL"
TOKEN_ENV: Final = "REEF_TOKEN"  # noqa: S105 (a variable name, not a secret)
UPSTREAM_URL_ENV: Final = "REEF_UPSTREAM_URL"
UPSTREAM_MODEL_ENV: Final = "REEF_UPSTREAM_MODEL"
UPSTREAM_API_KEY_ENV: Final = "REEF_UPSTREAM_API_KEY"
PROPOSER_SANDBOX_ENV: Final = "REEF_PROPOSER_SANDBOX"
# The interpreter an install script runs reef's wrapper with.
PYTHON_ENV: Final = "REEF_PYTHON"
# Settings an environment variable may give (`reef serve --help` lists them with their keys).
INFERENCE_TIMEOUT_ENV: Final = "REEF_INFERENCE_TIMEOUT_S"
SAO_BATCH_SIZE_ENV: Final = "REEF_SAO_BATCH_SIZE"
MAX_STALENESS_ENV: Final = "REEF_MAX_STALENESS"
HARNESS_ADAPTER_ENV: Final = "REEF_HARNESS_ADAPTER"

# --- routes -----------------------------------------------------------------------------------------------------
CHAT_ROUTE: Final = "/v1/chat/completions"
RESPONSES_ROUTE: Final = "/v1/responses"
MESSAGES_ROUTE: Final = "/v1/messages"
COUNT_TOKENS_ROUTE: Final = "/v1/messages/count_tokens"
INFERENCE_ROUTES: Final = (CHAT_ROUTE, RESPONSES_ROUTE, MESSAGES_ROUTE, COUNT_TOKENS_ROUTE)

HEALTH_ROUTE: Final = "/healthz"
STATUS_ROUTE: Final = "/reef/status"
REPORT_ROUTE: Final = "/reef/report"
EVENTS_ROUTE: Final = "/reef/events"
RECORDS_ROUTE: Final = "/reef/records"
RECORD_ROUTE: Final = "/reef/records/{id}"
SCENARIOS_ROUTE: Final = "/reef/scenarios"
SCENARIO_ROUTE: Final = "/reef/scenarios/{scenario}"
SCENARIO_UPDATE_ROUTE: Final = "/reef/scenarios/{scenario}/update"
RELEASES_ROUTE: Final = "/reef/scenarios/{scenario}/releases"
PROMOTE_ROUTE: Final = "/reef/scenarios/{scenario}/promote"
ROLLBACK_ROUTE: Final = "/reef/scenarios/{scenario}/rollback"
TRAIN_ROUTE: Final = "/reef/train"
REQUEST_ROUTE: Final = "/reef/requests/{request_id}"
HARNESS_ROUTE: Final = "/reef/harness"
HARNESS_ADAPTERS_ROUTE: Final = "/reef/harness/adapters"
INSTALL_ROUTE: Final = "/reef/harness/install"

# --- names ------------------------------------------------------------------------------------------------------
# Where the harness trials' model calls are recorded. Not work for a person: lists of unscored records leave them
# out unless this scenario is asked for by name.
TRIAL_SCENARIO: Final = "reef-trials"
# The file an install script leaves in the install root, naming what it installed (read by the wrapper).
INSTALL_SIDECAR: Final = ".reef-harness-release"

# A daemon bound to every interface is reached on loopback.
_WILDCARDS: Final = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}  # noqa: S104


def loopback_url(host: str, port: int) -> str:
    """The URL a client on this machine uses for a daemon listening on `host`:`port`."""
    host = _WILDCARDS.get(host, host).strip("[]")
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def awaits_score(row: RecordRow, scenario: str | None = None) -> bool:
    """Whether a record is one a person still has to score, in a list filtered on `scenario` (None: all)."""
    unscored = row["type"] == "inference" and row["score"] is None
    return unscored and (scenario is not None or row["scenario"] != TRIAL_SCENARIO)


# --- records: GET /reef/records, GET /reef/records/{id} -------------------------------------------------------
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
    Inference records stored with words to show carry `preview`."""

    sequence: int
    id: str
    scenario: str
    type: str  # inference | report | train
    created_at: float
    route: str | None
    model: str | None
    status: int | None
    complete: bool | None
    duration_ms: float | None
    usage: Usage
    score: float | None
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
    overhead_ms: float | None


class TokenData(TypedDict):
    """Token ids, log-probs and weight versions of an answer the embedded model generated."""

    prompt_ids: list[int]
    output_ids: list[int]
    logprobs: list[float]
    versions: list[str]


class RecordContent(TypedDict, total=False):
    """What a record carries besides its row: the embedded model's token data, and the content a client sent with
    a report (references, score, feedback, metadata) or a change request (text, session, release_id, client)."""

    tokens: TokenData
    references: list[str]
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
    """`GET /reef/records/{id}`: the record and the reports that reference it, oldest first."""

    reports: list[JudgedRecord]


class ReportAck(TypedDict):
    """`POST /reef/report`: the report's id and scenario, and whether it was new (False for a retry)."""

    agent_record_id: str
    scenario: str
    request_type: str
    created: bool


# --- scenarios: GET/POST /reef/scenarios ------------------------------------------------------------------------
class ScenarioInfo(TypedDict):
    """A scenario as created or updated."""

    scenario: str
    recipe: str
    training_mode: str  # auto | manual | hybrid
    created_at: float


class ScenarioRow(ScenarioInfo):
    """A scenario as `GET /reef/scenarios` lists it, with its counts and served release."""

    records: int
    reports: int
    unscored: int
    current_release: str | None


class ScenarioList(TypedDict):
    scenarios: list[ScenarioRow]


class ArchiveAck(TypedDict):
    """`DELETE /reef/scenarios/{s}`: the records stay, under the name `archived_as`."""

    scenario: str
    archived: bool
    archived_as: str


# --- steps and releases: GET /reef/scenarios/{s}/releases, promote, rollback -----------------------------------
class StepRow(TypedDict):
    """A committed step of a scenario's recipe (announced by `step` and `release` events)."""

    scenario: str
    step: int
    version: str | None  # vN counts the steps that made a version; None for a skipped or rejected step
    operation: str  # training | promote | rollback | creation
    result: str  # selected | rejected | skipped | pending
    release_id: str | None
    parent_release_id: str | None
    request_id: str | None
    consumed: list[str]
    metrics: dict[str, Any]
    created_at: float | None


class ReleaseRequest(TypedDict):
    """The change request a release answered."""

    id: str
    text: str | None
    session: str | None


class ReleaseRow(StepRow):
    """A release as `GET /reef/scenarios/{s}/releases` lists it (and promote and rollback answer with it).
    A recipe that publishes harness releases adds whether it waits for review and the request it answered."""

    current: bool
    pending: NotRequired[bool]
    promoted_as: NotRequired[str | None]
    restorable: NotRequired[bool]
    request: NotRequired[ReleaseRequest | None]


class ReleaseList(TypedDict):
    scenario: str
    releases: list[ReleaseRow]


# --- change requests: POST /reef/train, GET /reef/requests/{id} ------------------------------------------------
class TrainAck(TypedDict):
    """`POST /reef/train` (202): the request's id and where to follow it."""

    agent_record_id: str
    scenario: str
    request_type: str
    progress_path: str


class Activity(TypedDict):
    at: float
    text: str


class RequestProgress(TypedDict):
    """Where a change request stands; once `settled`, its result, reason, release and version."""

    id: str
    scenario: str
    text: str | None
    session: str | None
    created_at: float
    state: str  # queued | proposing | ... | settling | settled
    activity: list[Activity]
    design: str | None
    result: NotRequired[str]
    reason: NotRequired[str | None]
    release: NotRequired[str | None]
    version: NotRequired[str | None]  # None when the request made no version (skipped, rejected)
    how_to_use: NotRequired[str | None]
    evidence: NotRequired[Evidence | None]  # the evaluation gate's, once settled


# --- harness: GET /reef/harness, GET /reef/harness/adapters ----------------------------------------------------
class HarnessFiles(TypedDict):
    """A harness release's files (path to text), with its version and parent release."""

    scenario: str
    release_id: str
    version: str | None
    current: bool
    adapter: str | None
    parent_release_id: str | None
    files: dict[str, str]
    requires: list[str]
    entries: list[dict[str, Any]]


class AdapterInfo(TypedDict):
    """An agent a harness can be installed for, and what it renders."""

    name: str
    title: str
    binary: str
    renders: dict[str, str]
    notes: list[str]


class AdapterRow(AdapterInfo):
    serving: bool


class AdapterList(TypedDict):
    adapters: list[AdapterRow]


# --- status: GET /reef/status ----------------------------------------------------------------------------------
class RecipeStatus(TypedDict):
    """The recipe: its name and whether it trains; each built-in recipe adds its own facts."""

    name: str
    trains: bool
    harness: NotRequired[bool]  # true where the recipe evolves a harness, so takes change requests
    # reefine
    adapter: NotRequired[str]
    answer_tokens: NotRequired[int]
    trial: NotRequired[str]
    proposer: NotRequired[str]
    # sao and grpo
    scenario: NotRequired[str | None]
    head: NotRequired[str | None]
    steps_done: NotRequired[int]
    policy_updates: NotRequired[int]
    trainable_parameters: NotRequired[int]
    last_swap_s: NotRequired[float | None]
    checkpoints: NotRequired[list[str]]
    sampling: NotRequired[str]


class SamplingDefaults(TypedDict):
    """What the embedded model samples with when a request sets nothing."""

    temperature: float
    top_p: float
    max_tokens: int


class RuntimeStatus(TypedDict):
    """The runtime that answers inference: its kind and model; the embedded model adds what it loaded."""

    kind: str
    model: str | None
    url: NotRequired[str]
    source: NotRequired[str]
    parameters: NotRequired[int]
    weight_version: NotRequired[str]
    tokens_per_second: NotRequired[float | None]
    context_length: NotRequired[int]
    weights: NotRequired[str]
    load_s: NotRequired[float]
    sampling: NotRequired[SamplingDefaults]
    peak_batch: NotRequired[int]
    engine: NotRequired[str]
    decoding: NotRequired[str]


class DaemonState(TypedDict):
    """The daemon's own part of the status: uptime, recipe, runtime, auth, state folder and workers' errors."""

    uptime_s: float
    recipe: RecipeStatus
    runtime: RuntimeStatus
    auth: bool
    state_dir: str
    errors: list[str]


class ScenarioCounts(TypedDict):
    recipe: str
    training_mode: str
    records: int
    reports: int
    unscored: int


class ScenarioTraining(TypedDict):
    """A scenario's recipe worker: steps so far, the last one, waiting units, ineligible counts, a running step."""

    steps: int
    last_step: StepRow | None
    waiting_units: int
    ineligible: dict[str, int]
    running_since: float | None
    error: str | None


class Training(TypedDict):
    enabled: bool
    scenarios: dict[str, ScenarioTraining]


class StoreStatus(TypedDict):
    path: str
    commits: int
    writes: int


class ScoreScale(TypedDict):
    """The scores a report may give: `min` is the worst, `max` the best (settings reports.score-min/max)."""

    min: float
    max: float


class Status(DaemonState):
    """`GET /reef/status`: version, the daemon's state, per-scenario counts, training, the store and the score
    scale."""

    version: str
    scenarios: dict[str, ScenarioCounts]
    training: Training
    store: StoreStatus
    score_scale: ScoreScale


class Health(TypedDict):
    ok: bool


# --- records in and out: POST /reef/records/batch, GET /reef/export ------------------------------------------
RECORDS_BATCH_ROUTE: Final = "/reef/records/batch"
EXPORT_ROUTE: Final = "/reef/export"
# The tag an imported record carries, naming the format it came from (openai, claude-code, codex, pi).
IMPORTED_TAG: Final = "imported"
EXPORT_FORMATS: Final = ("openai", "preference", "tokens")
# `GET /reef/export` names in this header how many records it will read (the lines may be fewer).
EXPORT_TOTAL_HEADER: Final = "x-reef-export-records"
# The most conversations one `POST /reef/records/batch` takes.
MAX_BATCH: Final = 1000


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


def low_score_below(scale: ScoreScale) -> float:
    """Scores below this are low: the middle of the deployment's scale (reports.score-min/max). Low-scored
    conversations are what reefine learns from and what replay tasks are made of."""
    return (scale["min"] + scale["max"]) / 2


# --- evaluation tasks: /reef/scenarios/{s}/tasks ---------------------------------------------------------------
TASKS_ROUTE: Final = "/reef/scenarios/{scenario}/tasks"
TASK_ROUTE: Final = "/reef/scenarios/{scenario}/tasks/{task}"
# Make a replay a protected task; hide a replay for good.
TASK_PROMOTE_ROUTE: Final = "/reef/scenarios/{scenario}/tasks/{task}/promote"
TASK_DISMISS_ROUTE: Final = "/reef/scenarios/{scenario}/tasks/{task}/dismiss"
# A task's id is "t-<hex>"; a replay's is "r-<the id of the record it replays>".
TASK_ID_PREFIX: Final = "t-"
REPLAY_ID_PREFIX: Final = "r-"
# What `POST /reef/scenarios/{s}/tasks` accepts at most.
MAX_TASK_PROMPT_CHARS: Final = 100_000
MAX_TASK_CHECK_CHARS: Final = 10_000  # a regex or a judge instruction
MAX_FIXTURE_FILES: Final = 200
MAX_FIXTURE_CHARS: Final = 1_000_000  # all files' text together
MAX_FIXTURE_PATH_CHARS: Final = 255


class EvalTask(TypedDict):
    """A scenario's evaluation task: a prompt, the files of its workspace (relative path to text; `{}` for none) and
    at most one check of the final answer (a regular expression, or an instruction to a judge). A replay is the
    opening user turn of a recent low-scored conversation (`source_record`), offered until promoted or dismissed;
    protected tasks guard against regressions."""

    id: str
    scenario: str
    kind: Literal["task", "replay"]
    prompt: str
    fixture: dict[str, str]
    regex: str | None
    judge: str | None
    protected: bool
    source_record: str | None
    created_at: float


class TaskList(TypedDict):
    """`GET /reef/scenarios/{s}/tasks`: the stored tasks (oldest first) and the current replays (newest first)."""

    scenario: str
    tasks: list[EvalTask]
    replays: list[EvalTask]


class ReplayDismissed(TypedDict):
    """`POST /reef/scenarios/{s}/tasks/{id}/dismiss`: the replay no longer offered."""

    scenario: str
    id: str
    dismissed: bool


# --- the evaluation gate: its evidence in step metrics, release manifests and GET /reef/requests/{id} ------------
class EvidenceRow(TypedDict):
    """One task the served version and the candidate both ran: what each did (`served`, `candidate`: the outcome in
    a few words, or why it did not run), and the verdict on the candidate (better | same | worse | not run)."""

    task: str
    kind: Literal["behaviour", "task", "replay"]
    protected: bool
    prompt: str
    served: str
    candidate: str
    verdict: Literal["better", "same", "worse", "not run"]
    reason: str


class Evidence(TypedDict):
    """The gate's decision on a candidate (`passed`; `reason` names the task that failed), what it compared
    (`served`: the served release id), what it spent, and one row per task."""

    passed: bool
    ran: bool
    reason: str
    served: str | None
    seconds: float
    model_calls: int
    rows: list[EvidenceRow]


# --- live evidence: per-version scores of real sessions, and canaries ------------------------------------------
VERSION_SCORES_ROUTE: Final = "/reef/scenarios/{scenario}/versions/scores"
CANARY_ROUTE: Final = "/reef/scenarios/{scenario}/canary"
# Where an install keeps the canary's tree, beside the served one (relative to the install root).
CANARY_DIR: Final = ".reef-canary"
# The kind of the event that says a canary started or ended (and why).
CANARY_EVENT: Final = "canary"


class ScoreInterval(TypedDict):
    """A 95% confidence interval of a mean (Student's t with n-1 degrees of freedom)."""

    low: float
    high: float


class VersionScore(TypedDict):
    """How the real sessions one harness release served went: counted over the inference records tagged with it.
    `mean`, `interval` and `low_share` are over the scored records (None when there are none; the interval needs
    two). `trend` is the mean score in each of the scenario's equal time windows, None where none was scored."""

    release_id: str
    sessions: int
    records: int
    scored: int
    mean: float | None
    interval: ScoreInterval | None
    low_share: float | None
    first_at: float | None
    last_at: float | None
    trend: list[float | None]


class CanaryState(TypedDict):
    """A canary: `share` percent of new sessions run `release_id` (`version`) instead of the served release."""

    scenario: str
    release_id: str
    version: str
    share: float
    served_release_id: str
    started_at: float


class VersionScores(TypedDict):
    """`GET /reef/scenarios/{s}/versions/scores`: per served release, the live scores; the scale and where `low`
    starts (scores below the middle of the scale); the running canary, if any."""

    scenario: str
    score_min: float
    score_max: float
    low_below: float
    confidence: float
    method: str
    versions: list[VersionScore]
    canary: CanaryState | None


class CanaryEnded(TypedDict):
    """`DELETE /reef/scenarios/{s}/canary`: the canary that ended (None: none ran) and why."""

    scenario: str
    ended: CanaryState | None
    reason: str


class CanaryAnswer(TypedDict):
    """`GET /reef/scenarios/{s}/canary` (and what `POST` starts): the scenario's canary, None when none runs."""

    scenario: str
    canary: CanaryState | None


# Where reef hands eligible rollouts to a Slime job (training.trainer = slime), set in the job's environment.
SLIME_SPOOL_ENV: Final = "REEF_SLIME_SPOOL"
# SAO's length-adaptive GAE alpha, handed to the Slime job's advantage hook (Slime drops flags it does not know).
SAO_LAMBDA_ALPHA_ENV: Final = "REEF_SAO_LAMBDA_ALPHA"
