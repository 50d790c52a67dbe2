"""Names that reach file paths and URLs, checked in one place: scenario names from paths, queries and the header."""

from __future__ import annotations

import re

from reef_daemon.contract import SCENARIO_HEADER as SCENARIO_HEADER
from reef_daemon.contract import TRIAL_SCENARIO as TRIAL_SCENARIO
from reef_daemon.errors import BadRequest

_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")


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
