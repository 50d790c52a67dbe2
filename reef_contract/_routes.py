"""Where the daemon is found, and its routes: the inference APIs it serves and reef's own endpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Final

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8900
DEFAULT_URL: Final = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"
# Where a daemon started in a directory keeps its records, releases and pid file (relative to that directory).
DEFAULT_STATE_DIR: Final = Path(".reef")
# A daemon bound to every interface is reached on loopback.
_WILDCARDS: Final = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}  # noqa: S104


def loopback_url(host: str, port: int) -> str:
    """The URL a client on this machine uses for a daemon listening on `host`:`port`."""
    host = _WILDCARDS.get(host, host).strip("[]")
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


# The inference APIs, relayed to the runtime and recorded.
CHAT_ROUTE: Final = "/v1/chat/completions"
RESPONSES_ROUTE: Final = "/v1/responses"
MESSAGES_ROUTE: Final = "/v1/messages"
COUNT_TOKENS_ROUTE: Final = "/v1/messages/count_tokens"
INFERENCE_ROUTES: Final = (CHAT_ROUTE, RESPONSES_ROUTE, MESSAGES_ROUTE, COUNT_TOKENS_ROUTE)

# Whether the daemon answers (no token needed), its state, and its live events.
HEALTH_ROUTE: Final = "/healthz"
STATUS_ROUTE: Final = "/reef/status"
SPEND_ROUTE: Final = "/reef/spend"
EVENTS_ROUTE: Final = "/reef/events"

# Records and reports; records in and out.
REPORT_ROUTE: Final = "/reef/report"
# A judge ranks several answers to one prompt against each other; each gets a `judge` report.
JUDGE_GROUP_ROUTE: Final = "/reef/judge/group"
RECORDS_ROUTE: Final = "/reef/records"
RECORD_ROUTE: Final = "/reef/records/{id}"
RECORDS_BATCH_ROUTE: Final = "/reef/records/batch"
EXPORT_ROUTE: Final = "/reef/export"

# Scenarios, their releases and their evaluation tasks.
SCENARIOS_ROUTE: Final = "/reef/scenarios"
SCENARIO_ROUTE: Final = "/reef/scenarios/{scenario}"
SCENARIO_UPDATE_ROUTE: Final = "/reef/scenarios/{scenario}/update"
RELEASES_ROUTE: Final = "/reef/scenarios/{scenario}/releases"
# A release's files in a layout other tools load (a weight recipe's LoRA adapter: PEFT's).
RELEASE_FILES_ROUTE: Final = "/reef/scenarios/{scenario}/releases/{release_id}/files"
PROMOTE_ROUTE: Final = "/reef/scenarios/{scenario}/promote"
ROLLBACK_ROUTE: Final = "/reef/scenarios/{scenario}/rollback"
TASKS_ROUTE: Final = "/reef/scenarios/{scenario}/tasks"
TASK_ROUTE: Final = "/reef/scenarios/{scenario}/tasks/{task}"

# Make a replay a protected task; hide a replay for good.
TASK_PROMOTE_ROUTE: Final = "/reef/scenarios/{scenario}/tasks/{task}/promote"
TASK_DISMISS_ROUTE: Final = "/reef/scenarios/{scenario}/tasks/{task}/dismiss"

# Live evidence: per-version scores of real sessions, and canaries.
VERSION_SCORES_ROUTE: Final = "/reef/scenarios/{scenario}/versions/scores"
CANARY_ROUTE: Final = "/reef/scenarios/{scenario}/canary"
# Count a derived source's scores in a scenario again after its agreement with people switched it off.
SOURCE_ENABLE_ROUTE: Final = "/reef/scenarios/{scenario}/sources/{source}/enable"

# Change requests: POST files one, GET follows one. TRAIN_ROUTE is where filing was first, and still answers.
REQUESTS_ROUTE: Final = "/reef/requests"
REQUEST_ROUTE: Final = "/reef/requests/{request_id}"
TRAIN_ROUTE: Final = "/reef/train"

# The harness: a release's files, the adapters, and the install script.
HARNESS_ROUTE: Final = "/reef/harness"
HARNESS_ADAPTERS_ROUTE: Final = "/reef/harness/adapters"
INSTALL_ROUTE: Final = "/reef/harness/install"
