"""Names that reach file paths and URLs, checked in one place: scenario names from paths, queries and the header."""

from __future__ import annotations

import re
import time

from reef_contract import JUDGE_SCENARIO, SCENARIO_HEADER
from reef_daemon.errors import BadRequest

_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
_ARCHIVED = re.compile(r"[A-Za-z0-9._-]{1,128}\.archived-[0-9]{8}T[0-9]{6}Z-[0-9]{3}")


def check_scenario_name(name: str) -> str:
    """The name itself, or a 400 saying what a valid name looks like."""
    if not _NAME.fullmatch(name) or name in (".", ".."):
        raise BadRequest(
            "scenario names are 1 to 128 characters of letters, digits, '.', '_' and '-', and not '.' or '..'",
            type="invalid_scenario",
        )
    return name


def archived_name(name: str, now: float) -> str:
    """The name an archived scenario's records keep, which frees `name` for a new scenario."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    return f"{name}.archived-{stamp}-{int(now * 1000) % 1000:03d}"


def check_scenario_filter(name: str) -> str:
    """A scenario to filter records or events on: a valid name, or the longer name of an archived scenario."""
    return name if _ARCHIVED.fullmatch(name) else check_scenario_name(name)


def scenario_from_header(value: str | None) -> str:
    """The scenario a client's request writes into: never the judge's own, which holds only reef's judge calls (a
    record a client wrote there would be taken for the judge's)."""
    name = (value or "").strip()
    if not name:
        raise BadRequest(f"send the {SCENARIO_HEADER} header naming the workload", type="missing_scenario")
    if name == JUDGE_SCENARIO:
        raise BadRequest(
            f"{JUDGE_SCENARIO} holds reef's own judge calls and takes nothing from clients; name another scenario in"
            f" {SCENARIO_HEADER}",
            type="reserved_scenario",
        )
    return check_scenario_name(name)
