"""The wire contract: what the daemon and its clients (CLI, TUI, adapter wrappers) agree on.

Header and environment variable names, the default address and state folder, route paths, and the shapes of the
JSON the daemon answers with. Importable without aiohttp or torch, so every client can depend on it; a change of the
API's shape is made here and mypy finds every place that must follow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal, TypedDict

# --- addresses and folders ------------------------------------------------------------------------------------
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8900
DEFAULT_URL: Final = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"
# Where a daemon started in a directory keeps its records, releases and pid file (relative to that directory).
DEFAULT_STATE_DIR: Final = Path(".reef")

# --- headers ----------------------------------------------------------------------------------------------------
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

# --- the answer of an inference record ------------------------------------------------------------------------


class Usage(TypedDict):
    """Token counts of an exchange; None where the API did not say."""

    input_tokens: int | None
    output_tokens: int | None


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
