"""Which tree a session runs when the install holds a canary: a stable choice per session, from a hash of the
session id against the canary's share, made only while the daemon still runs that canary."""

from __future__ import annotations

import hashlib

from adapters.wrapper.installed import Installed
from reef_client import CanaryState, ReefClient, ReefClientError


def in_canary(session: str, share: float) -> bool:
    """Whether `session` falls in the first `share` percent: the same answer for the same session every time, and
    over many sessions a fraction near `share`/100."""
    point = int.from_bytes(hashlib.sha256(session.encode()).digest()[:8], "big") / 2**64
    return point * 100 < share


def session_install(installed: Installed, client: ReefClient, session: str) -> tuple[Installed, str | None]:
    """The install this session runs (the canary's tree or the served one) and a line saying why, for the person.

    The canary runs only while the daemon still runs that same canary: a canary rolled back (by a person or
    automatically) stops at the next session, before any update of the install."""
    canary = installed.canary
    try:
        running = client.canary(installed.binding.scenario)
    except ReefClientError:
        running = None  # a daemon without canaries, or a passing failure: the served tree is always safe
    if running is None:
        return installed, None
    share = running["share"]
    if canary is None or running["release_id"] != canary.binding.release_id:
        update = f"`{installed.wrapper} update` installs it beside the served version"
        return installed, f"a canary of {running['version']} runs for {share:g}% of sessions; {update}"
    if in_canary(session, share):
        return canary, f"this session runs the canary {canary.sidecar['version']} ({share:g}% of sessions)"
    return installed, None


def canary_line(installed: Installed, running: CanaryState | None) -> tuple[bool, str] | None:
    """`doctor`'s line on the canary: whether the install holds the one the daemon runs; None when neither has one."""
    canary = installed.canary
    if running is None:
        if canary is None:
            return None
        version = canary.sidecar["version"]
        return True, f"the installed canary {version} no longer runs; every session runs the served tree"
    if canary is None or canary.binding.release_id != running["release_id"]:
        update = f"{installed.wrapper} update installs it beside the served version"
        return False, f"a canary of {running['version']} runs; {update}"
    return True, f"canary {running['version']} installed: {running['share']:g}% of new sessions run it"
