"""Opening a client on the daemon a command names, and turning the client's failures into one line each."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from reef_cli.discovery import BadDaemonUrl, SeveralDaemons, Target, find_daemon, find_daemons
from reef_cli.output import fail
from reef_client import ApiError, DaemonUnreachable, ReefClient, Unauthorized, UnknownScenario, require_scenario


@contextmanager
def daemon_client(url: str | None, token: str | None, scenario: str | None = None) -> Iterator[ReefClient]:
    """A client of the daemon found from `--url`, `REEF_URL`, this directory or the default; expected failures
    inside the block exit with one line and status 1, never a traceback. With `scenario` (the one the command
    reads), a name the daemon does not know exits 2 first, with the closest name."""
    target = found_daemon(url, token)
    with ReefClient(target.url, target.token) as client, reported_failures(target):
        if scenario is not None:
            require_scenario(client, scenario)
        yield client


def found_daemon(url: str | None = None, token: str | None = None) -> Target:
    """The daemon a command talks to (see `find_daemon`); exit 1 with the choices when several run here."""
    try:
        return find_daemon(url, token)
    except SeveralDaemons as exc:
        fail(str(exc))
    except BadDaemonUrl as exc:
        fail(str(exc), 2)


def found_daemons(url: str | None = None, token: str | None = None) -> list[Target]:
    """Every daemon a command that reads them all talks to (see `find_daemons`)."""
    try:
        return find_daemons(url, token)
    except BadDaemonUrl as exc:
        fail(str(exc), 2)


@contextmanager
def reported_failures(target: Target) -> Iterator[None]:
    """Turn DaemonUnreachable, Unauthorized and ApiError raised inside the block into one line and exit 1;
    UnknownScenario (a name typed wrong) exits 2."""
    try:
        yield
    except UnknownScenario as exc:
        fail(str(exc), 2)
    except DaemonUnreachable as exc:
        fail(f"no daemon answers at {exc.url} ({exc.reason}); start one with `reef start`, or set --url / REEF_URL")
    except Unauthorized as exc:
        if target.token:
            fail(f"the daemon at {exc.url} refused the token; set REEF_TOKEN (or --token) to the daemon's token")
        fail(f"the daemon at {exc.url} needs a token; set REEF_TOKEN (or pass --token)")
    except ApiError as exc:
        fail(f"{exc.message} ({exc.type})")
