"""GET /reef/status and GET /healthz: the daemon, its recipe and runtime, per-scenario counts, training, the store."""

from __future__ import annotations

import math
from typing import Any, Final, NotRequired, TypedDict

from reef_contract._releases import StepRow


class CriticStatus(TypedDict):
    """SAO's critic over its last samples (at most 32 since the daemon started): is it learning? `value_min` and
    `value_max` bound the values of the last step's tokens (read before the critic trained on them);
    `explained_variance` is 1 - Var(R - V) / Var(R) over the window's tokens (None while every reward there is the
    same; near 0 or below: the critic explains nothing); `failed_positive_share` is the share of the window's failed
    answers (score below the middle of the scale) whose mean advantage was positive, so that training made them more
    likely (None before any failed answer)."""

    value_min: float | None  # the values of the last step's tokens, read before the critic trained on them
    value_max: float | None
    explained_variance: float | None  # 1 - Var(R - V) / Var(R) over the window's tokens; None while R is constant
    failed_positive_share: float | None  # of the window's failed answers (score below the scale's middle), the
    # share whose mean advantage was positive (pushed up); None before any failed answer
    window: int  # samples in the window
    warmup_steps_left: int  # critic-only steps before the policy first moves


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
    outcomes: NotRequired[str]  # what outcome reports feed, where the recipe does not train on them
    critic: NotRequired[CriticStatus]  # sao only
    weights: NotRequired[str]  # what a step trains: lora (an adapter per scenario) or full
    adapters: NotRequired[dict[str, str | None]]  # with lora: each training scenario's serving release


class SamplingDefaults(TypedDict):
    """What the embedded model samples with when a request sets nothing, and the bounds of every answer: at most
    `max_answer_tokens` tokens and `max_answer_s` seconds whatever a request asks, and cut once its last
    `repeat_stop_tokens` tokens repeat one span (0: never)."""

    temperature: float
    top_p: float
    max_tokens: int
    max_answer_tokens: int
    max_answer_s: float
    repeat_stop_tokens: int


class ServedAdapters(TypedDict):
    """The LoRA adapters an embedded engine serves beside its base weights: every scenario with one, those held in
    memory (least recently used first; the others are read back from disk when asked for), and the memory those take
    (torch engine)."""

    scenarios: list[str]
    resident: list[str]
    resident_bytes: NotRequired[int]


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
    prompt_tokens_read: NotRequired[int]  # context tokens the model read since it started (prompts, re-reads)
    prompt_tokens_reused: NotRequired[int]  # and those taken from the kept cache of the last prompt instead
    engine: NotRequired[str]
    decoding: NotRequired[str]
    adapters: NotRequired[ServedAdapters]  # only while a weight recipe serves LoRA adapters


class DaemonState(TypedDict):
    """The daemon's own part of the status: uptime, recipe, runtime, auth, state folder and workers' errors.
    `client_auth` is inference.client-auth (`pass`: a client that sends reef's token in x-reef-token has its own
    Authorization / x-api-key forwarded upstream); `upstream_key` whether reef holds a key of its own for upstream."""

    uptime_s: float
    recipe: RecipeStatus
    runtime: RuntimeStatus
    auth: bool
    client_auth: str
    upstream_key: bool
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
    runs_here: bool  # this daemon holds the scenario's worker (daemons sharing a store run it on one of them)


class Training(TypedDict):
    enabled: bool
    scenarios: dict[str, ScenarioTraining]


class StoreStatus(TypedDict):
    engine: str  # sqlite | postgresql
    path: str  # the SQLite file, or the PostgreSQL database (without its password)
    commits: int
    writes: int
    max_bytes: int | None  # the retention budget (store.max-bytes, store.max-age); None: unbounded
    max_age_s: float | None
    body_bytes: int | None  # record bodies kept, and records trimmed, as of the last retention pass (None: none)
    trimmed: int | None


class NextTurnStatus(TypedDict):
    """What the signals read from a session's next request did since the daemon started: the reports each source
    made (`reports`: words, retry, interruption, tool-error, tests, next-turn). What the next-turn judge
    (reports.next-turn) did: the assistant turns a user answered that the rules left to it (`turns`), those it
    scored (`judged`), those it found neutral (`neutral`: no report), those it could not (`no_judgment`: the judge
    failed, timed out, answered off its format, or its votes had no majority), those passed
    over for its bounds (calls per minute, waiting turns), the follow-ups that were not the user's (tool results, the
    agent's own), the judge's answers whose own score disagreed with their verdict (`scores_ignored`: the verdict
    counts), and the tokens its calls cost. Matching a request to the answer it continues: the requests that continue
    no answer the judge keeps (`unmatched`: let go, never recorded here, or not what the model answered), the answers
    let go unjudged for reports.next-turn-memory (`forgotten`), and the bytes the kept answers hold now
    (`kept_bytes`); and why the last call without a verdict gave none (`the judge at URL answered HTTP 404`, no
    answer, no verdict in its answer)."""

    reports: dict[str, int]
    turns: int
    judged: int
    neutral: int
    no_judgment: int
    over_bounds: int
    not_the_user: int
    scores_ignored: int
    unmatched: int
    forgotten: int
    kept_bytes: int
    input_tokens: int
    output_tokens: int
    last_failure: NotRequired[str | None]


class ScoreScale(TypedDict):
    """The scores a report may give: `min` is the worst, `max` the best (settings reports.score-min/max)."""

    min: float
    max: float


class SourceAgreement(TypedDict):
    """How a derived source agrees with people in one scenario, on the records both scored (`shared`): Cohen's κ
    on low/high (a score below the middle of the scale is low), None while undefined (nothing shared, or either side
    all low or all high). `counts`: whether its scores count toward training, live scores, canaries and the gate's
    tasks; `reason`: why not (its κ fell below reports.min-agreement), or that a person turned it back on."""

    shared: int
    kappa: float | None
    counts: bool
    reason: str | None


class SourceEnabled(TypedDict):
    """`POST /reef/scenarios/{s}/sources/{source}/enable`: the source counts in the scenario again, for good."""

    scenario: str
    source: str
    agreement: SourceAgreement


class Spend(TypedDict):
    """What exchanges cost in USD by the price table (telemetry.prices): `usd` over the `priced` ones; `unpriced`
    exchanges (a model the table does not name, or no token counts) are not in `usd`, which is then a lower bound."""

    usd: float
    priced: int
    unpriced: int


class TelemetryState(TypedDict):
    """OpenTelemetry export (telemetry.otlp-endpoint or OTEL_EXPORTER_OTLP_ENDPOINT): spans the collector took,
    spans in batches it did not take (down, refusing, timed out), spans dropped before sending (the queue was full)."""

    exporting: bool
    exported: int
    failed: int
    dropped: int


class Status(DaemonState):
    """`GET /reef/status`: version, the daemon's state, per-scenario counts, training, the store and the score
    scale."""

    version: str
    scenarios: dict[str, ScenarioCounts]
    training: Training
    store: StoreStatus
    score_scale: ScoreScale
    next_turn: NextTurnStatus | None  # None while every signal from the next request is off
    # Per scenario, per derived source that shares records with people (or was switched off or on): its agreement.
    sources: dict[str, dict[str, SourceAgreement]]
    telemetry: TelemetryState | None  # None while nothing is exported


class SpendAnswer(TypedDict):
    """`GET /reef/spend`: what exchanges cost by the price table. It sums every exchange's token counts (a scan of
    the store, so it is a route of its own, not part of the status clients poll)."""

    # Per scenario (the judge's calls under reef-judge): what its exchanges cost.
    scenarios: dict[str, Spend]
    # The judge's calls by the source that asked for them (next-turn, group), what they cost.
    judge: dict[str, Spend]


class Health(TypedDict):
    """GET /healthz: ok, or (503) why the daemon cannot answer model requests (the embedded model's generation
    thread stopped)."""

    ok: bool
    error: NotRequired[str]


SMALL_MODEL_PARAMETERS: Final = 1_000_000_000


def small_embedded_model(runtime: RuntimeStatus) -> bool:
    """Whether the served model is the small embedded one (the torch engine's model of under a billion parameters),
    which mostly cannot write a harness change or judge an answer."""
    if runtime["kind"] != "embedded" or runtime.get("engine") == "sglang":
        return False
    return runtime.get("parameters", 0) < SMALL_MODEL_PARAMETERS


def low_score_below(scale: ScoreScale) -> float:
    """Scores below this are low: the middle of the deployment's scale (reports.score-min/max). Low-scored
    conversations are what reefine learns from and what replay tasks are made of."""
    return (scale["min"] + scale["max"]) / 2


def score_problem(score: Any) -> str | None:
    """What is wrong with a score as sent in JSON, in the same words wherever one is read (reports, `reef score
    --from`, imports); None for a finite number. A number sent as text ("0.8") is refused, saying so."""
    if isinstance(score, str):
        try:
            float(score)
        except ValueError:
            return f"score must be a number, not text ({score[:40]!r})"
        return f"score must be a number, not text: write {score[:40]} without quotes"
    if isinstance(score, bool) or not isinstance(score, int | float):
        return "score must be a number"
    try:
        finite = math.isfinite(float(score))
    except OverflowError:  # an integer beyond a double's range
        finite = False
    return None if finite else "score must be a finite number"


def off_the_scale(score: float, low: float, high: float) -> str | None:
    """Why a score is refused for lying outside the deployment's scale, or None when it is on it."""
    if low <= score <= high:
        return None
    return f"score {score:g} is outside this deployment's scale: from {low:g} (worst) to {high:g} (best)"
