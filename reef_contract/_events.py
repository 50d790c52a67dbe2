"""Events: what `GET /reef/events` sends, one server-sent event per committed change, resumable by sequence.

Each frame is `event: <name>`, `id: <sequence>` and one JSON `data:` line: the payload of that event's type below,
with `type`, `sequence` and `scenario` added. Records announce themselves: storing a record of a type publishes the
event RECORD_EVENTS names, with the record's row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal, NotRequired, TypedDict, get_args

from reef_contract._harness import CanaryState
from reef_contract._records import RecordRow, RecordType
from reef_contract._releases import StepRow
from reef_contract._requests import RequestState
from reef_contract._scenarios import ScenarioInfo
from reef_contract._status import SourceAgreement

EventName = Literal["record", "report", "request", "scenario", "step", "release", "canary", "source"]
EVENT_NAMES: Final[tuple[EventName, ...]] = get_args(EventName)
# The event a stored record of each type publishes (and is replayed as).
RECORD_EVENTS: Final[Mapping[RecordType, EventName]] = {"inference": "record", "report": "report", "request": "request"}
# The record type whose records an event announces: what a recipe that consumes that type wakes for.
EVENT_RECORD_TYPES: Final[Mapping[EventName, RecordType]] = {event: type_ for type_, event in RECORD_EVENTS.items()}
# The kind of the event that says a canary started or ended (and why).
CANARY_EVENT: Final[EventName] = "canary"
# The kind of the event that says a derived source stopped counting in a scenario (and why), or counts again.
SOURCE_EVENT: Final[EventName] = "source"


class RecordEvent(TypedDict):
    """`record`: an inference record was stored."""

    record: RecordRow


class ReportEvent(TypedDict):
    """`report`: a report was stored; it gave `score` (None: feedback only) to the records it `references`."""

    record: RecordRow
    references: list[str]
    score: float | None


class RequestEvent(TypedDict):
    """`request`: a change request was filed (`record` is its row) or moved on (`record` is None)."""

    request: RequestState
    record: RecordRow | None


class ScenarioChange(ScenarioInfo):
    """A scenario as a `scenario` event shows it: what it was renamed to when archived, its recipe before a change."""

    archived_as: NotRequired[str]
    previous_recipe: NotRequired[str]


class ScenarioEvent(TypedDict):
    """`scenario`: a scenario was created, updated or archived."""

    action: Literal["created", "updated", "archived"]
    object: ScenarioChange


class StepEvent(TypedDict):
    """`step`: a recipe committed a step."""

    step: StepRow


class ReleaseEvent(TypedDict):
    """`release`: a step published a release (selected, or pending review)."""

    release: StepRow


class CanaryEvent(TypedDict):
    """`canary`: a canary started, ended or was rolled back (`canary`: the canary it was about), and why."""

    action: str
    canary: CanaryState | None
    reason: str


class SourceEvent(TypedDict):
    """`source`: a derived source stopped counting in the scenario (`distrusted`: its agreement with people fell
    below reports.min-agreement) or a person turned it back on (`enabled`); `agreement` as it stood then."""

    action: Literal["distrusted", "enabled"]
    source: str
    agreement: SourceAgreement
    reason: str


EventData = (
    RecordEvent | ReportEvent | RequestEvent | ScenarioEvent | StepEvent | ReleaseEvent | CanaryEvent | SourceEvent
)
