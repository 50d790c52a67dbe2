"""Which login a session runs on: the person's own (forwarded by a daemon in inference.client-auth pass), or reef's."""

from __future__ import annotations

import os

from adapters._agent import Login
from adapters.wrapper.installed import Installed
from reef_client import ReefClient
from reef_contract import DaemonState

PASS = "pass"  # noqa: S105 - a mode of inference.client-auth
TURN_ON = "start the daemon with --inference.client-auth pass to run on it"


def own_login(installed: Installed) -> Login | None:
    """The person's own login the agent could use, as found in this environment."""
    return installed.adapter.agent.login(os.environ)


def carried_login(installed: Installed, client: ReefClient) -> Login | None:
    """The person's login when the session can run on it: found, usable, and forwarded by the daemon."""
    login = own_login(installed)
    if login is None or login.refused is not None or client.status()["client_auth"] != PASS:
        return None
    return login


def login_check(login: Login | None, daemon: DaemonState) -> tuple[bool, str]:
    """`doctor`'s line on the login a session uses, and whether the daemon forwards it."""
    fallback = "reef's upstream key" if daemon["upstream_key"] else "no key of reef's (the upstream gets none)"
    if login is None:
        return True, f"login: none of your own found; model calls go upstream with {fallback}"
    if login.refused is not None:
        return daemon["upstream_key"], f"login: {login.what} is not used, {login.refused}; calls go with {fallback}"
    if daemon["client_auth"] != PASS:
        said = f"login: {login.what} is not forwarded (the daemon's inference.client-auth is reef); {TURN_ON}"
        return daemon["upstream_key"], f"{said}; calls go with {fallback}"
    return True, f"login: {login.what}, forwarded upstream unchanged (inference.client-auth pass)"
