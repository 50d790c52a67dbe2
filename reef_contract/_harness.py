"""The harness: its files and adapters, install names, evaluation tasks, the gate's evidence, and live evidence
(per-version scores and canaries)."""

from __future__ import annotations

from typing import Any, Final, Literal, TypedDict

from reef_contract._status import Spend

# The file an install script leaves in the install root, naming what it installed (read by the wrapper).
INSTALL_SIDECAR: Final = ".reef-harness-release"


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


# A task's id is "t-<hex>"; a replay's is "r-<the id of the record it replays>".
TASK_ID_PREFIX: Final = "t-"
REPLAY_ID_PREFIX: Final = "r-"
# What `POST /reef/scenarios/{s}/tasks` accepts at most.
MAX_TASK_PROMPT_CHARS: Final = 100_000
MAX_TASK_CHECK_CHARS: Final = 10_000  # a regex or a judge instruction
MAX_FIXTURE_FILES: Final = 200
MAX_FIXTURE_CHARS: Final = 1_000_000  # all files' text together
MAX_FIXTURE_PATH_CHARS: Final = 255
MAX_FIXTURE_NAME_BYTES: Final = 255  # one file or folder name, in UTF-8 (what a file system takes)
# `GET /reef/scenarios/{s}/tasks?after=<task id>&limit=N`: a page of stored tasks.
TASK_PAGE_DEFAULT: Final = 50
TASK_PAGE_MAX: Final = 200


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
    """`GET /reef/scenarios/{s}/tasks`: a page of the stored tasks (oldest first; `next_after`: the `after` of the
    next page, None on the last) and the current replays (newest first)."""

    scenario: str
    tasks: list[EvalTask]
    replays: list[EvalTask]
    next_after: str | None


class ReplayDismissed(TypedDict):
    """`POST /reef/scenarios/{s}/tasks/{id}/dismiss`: the replay no longer offered."""

    scenario: str
    id: str
    dismissed: bool


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


# Where an install keeps the canary's tree, beside the served one (relative to the install root).
CANARY_DIR: Final = ".reef-canary"
# The share of new sessions a canary may serve, in percent: at least one in a hundred, and never all of them.
CANARY_LOWEST_SHARE: Final = 1
CANARY_HIGHEST_SHARE: Final = 99


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
    spend: Spend  # what the records tagged with it cost (telemetry.prices)


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
