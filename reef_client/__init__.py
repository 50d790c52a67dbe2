"""The client side of reef, shared by the `reef` CLI, the TUI and the `reef-<adapter>` wrappers: the one HTTP client
of the daemon API, its live events, following a change request, installing a harness release here, writing an
export to a file, and (in `reef_client.render`) the renderers that show daemon answers in a terminal.

It knows the daemon only through the wire contract (`reef_daemon.contract`); the answer types below are the
contract's own, re-exported so that a caller needs one import.
"""

from reef_client._client import (
    ApiError,
    ChatReply,
    DaemonUnreachable,
    ExportStream,
    ReefClient,
    ReefClientError,
    Unauthorized,
)
from reef_client._events import Event
from reef_client._exporting import nothing_to_export, unwritable, whole_file
from reef_client._installs import ShownRelease, installed_releases, mark_installed, run_install_script
from reef_client._requests import (
    ProgressLines,
    follow_request,
    request_outcome,
    request_status,
    small_model_caution,
    wait_bound,
)
from reef_client._scenarios import UnknownScenario, require_scenario
from reef_daemon.contract import (
    Activity,
    AdapterRow,
    BatchAck,
    CanaryEnded,
    CanaryState,
    EvalTask,
    HarnessFiles,
    JudgedRecord,
    RecordDetail,
    RecordPage,
    RecordRow,
    ReleaseRow,
    ReportAck,
    RequestAck,
    RequestProgress,
    ScenarioInfo,
    ScenarioRow,
    Status,
    StoredRecord,
    TaskList,
    VersionScore,
    VersionScores,
)

__all__ = [
    "Activity",
    "AdapterRow",
    "ApiError",
    "BatchAck",
    "CanaryEnded",
    "CanaryState",
    "ChatReply",
    "DaemonUnreachable",
    "EvalTask",
    "Event",
    "ExportStream",
    "HarnessFiles",
    "JudgedRecord",
    "ProgressLines",
    "RecordDetail",
    "RecordPage",
    "RecordRow",
    "ReefClient",
    "ReefClientError",
    "ReleaseRow",
    "ReportAck",
    "RequestAck",
    "RequestProgress",
    "ScenarioInfo",
    "ScenarioRow",
    "ShownRelease",
    "Status",
    "StoredRecord",
    "TaskList",
    "Unauthorized",
    "UnknownScenario",
    "VersionScore",
    "VersionScores",
    "follow_request",
    "installed_releases",
    "mark_installed",
    "nothing_to_export",
    "request_outcome",
    "request_status",
    "require_scenario",
    "run_install_script",
    "small_model_caution",
    "unwritable",
    "wait_bound",
    "whole_file",
]
