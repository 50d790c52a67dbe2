"""Scenarios: GET/POST /reef/scenarios, and the scenario the harness trials are recorded under."""

from __future__ import annotations

from typing import Final, TypedDict

# Where the harness trials' model calls are recorded. Not work for a person: lists of unscored records leave them
# out unless this scenario is asked for by name.
TRIAL_SCENARIO: Final = "reef-trials"
# Where the judge's model calls are recorded, so what judging costs is visible. Only reef writes there: a client
# request naming it is refused.
JUDGE_SCENARIO: Final = "reef-judge"
# Scenarios of reef's own model calls: lists of records awaiting a score leave them out.
INTERNAL_SCENARIOS: Final = (TRIAL_SCENARIO, JUDGE_SCENARIO)


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
