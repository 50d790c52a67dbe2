"""Scenario names reach file paths and URLs, so they are checked in one place."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from reef_daemon.errors import BadRequest

_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
SCENARIO_HEADER = "x-reef-scenario"
# Where the harness trials' model calls are recorded. Not work for a person: lists of unscored records leave them
# out unless this scenario is asked for by name.
TRIAL_SCENARIO = "reef-trials"


def awaits_score(row: Mapping[str, Any], scenario: str | None = None) -> bool:
    """Whether a record is one a person still has to score, in a list filtered on `scenario` (None: all)."""
    unscored = row.get("type") == "inference" and row.get("score") is None
    return unscored and (scenario is not None or row.get("scenario") != TRIAL_SCENARIO)


def check_scenario_name(name: str) -> str:
    """The name itself, or a 400 saying what a valid name looks like."""
    if not _NAME.fullmatch(name) or name in (".", ".."):
        raise BadRequest(
            "scenario names are 1 to 128 characters of letters, digits, '.', '_' and '-', and not '.' or '..'",
            type="invalid_scenario",
        )
    return name


def scenario_from_header(value: str | None) -> str:
    name = (value or "").strip()
    if not name:
        raise BadRequest(f"send the {SCENARIO_HEADER} header naming the workload", type="missing_scenario")
    return check_scenario_name(name)
