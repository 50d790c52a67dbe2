"""What an adapter knows about running its agent on the person's machine.

The served tree is binding-free. At install time each adapter adds its model binding (this daemon's URL, the
scenario, the served model, the installed release) and reef's own in-session entries; the wrapper then starts
the agent with its home pointed at the install root. The token is never written into any of these files: every
binding names the `REEF_TOKEN` variable, which the wrapper sets from the token saved at install time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from reef_contract import RELEASE_HEADER, SCENARIO_HEADER
from reef_harness import Entry

SESSION_ENV = "REEF_HARNESS_SESSION"
# Why a tree may not set a key that chooses or redirects the model.
BINDING_IS_REEFS = "the model binding is set by the install script"


@dataclass(frozen=True)
class Binding:
    """Where the agent's model calls go: reef's URL (no trailing slash), the scenario, the model and the release."""

    url: str
    scenario: str
    model: str
    release_id: str


def reef_headers(binding: Binding) -> dict[str, str]:
    """The headers every binding sends as written: the scenario and the installed release. The session tag, read
    from SESSION_ENV when the agent runs, is each agent's own to spell."""
    return {SCENARIO_HEADER: binding.scenario, RELEASE_HEADER: binding.release_id}


@dataclass(frozen=True)
class Login:
    """The person's own login to the agent's provider, as the wrapper finds it: what it is (for `doctor`), the
    variables that hand it to the agent in a session, or why reef-<agent> cannot carry it. It lives in the agent's
    environment only: reef writes it nowhere."""

    what: str
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    refused: str | None = None


def _no_login(environ: Mapping[str, str]) -> Login | None:
    return None


class SessionEnv(Protocol):
    """The variables of one session: its tag and reef's token, and, with `login`, the person's own login, which
    the daemon forwards (reef's token then travels in a header of its own)."""

    def __call__(self, binding: Binding, session: str, token: str, login: Login | None = None) -> dict[str, str]: ...


def _args_as_given(root: Path, args: list[str]) -> list[str]:
    return list(args)


def _no_session_env(binding: Binding, session: str, token: str, login: Login | None = None) -> dict[str, str]:
    return {}


@dataclass(frozen=True)
class AgentSide:
    """How one agent is installed and started.

    `bind` returns the rendered files with the binding added (it may change tree files, such as a config file the
    tree also writes). `env` is the agent-specific environment for a session run from `root`; `args` turns the
    person's arguments into the agent's (by default, as given), and `headless` gives the person's arguments for one
    prompt answered without a terminal. `state_keys` names JSON files the agent rewrites in place and the keys it
    may change there (its preferences); everything else the install wrote must keep its content. `loaded` names the
    files and folders (relative to the root) the agent loads instructions, code or settings from: a file there the
    install did not write stops a session, unless it matches one of `own_files`, the patterns of what the agent
    writes there itself. `offline_env` keeps the agent off the network at start-up (no update checks) for a trial
    run on the daemon host. `session_env` gives the variables that carry one session's tag and token, for agents
    that read them only from their own variables (`binding, session, token`). `traffic` says, for `doctor`, whether
    the install keeps nonessential traffic, telemetry and auto-update off (None: the agent has no such settings).
    `login` finds the person's own login in their environment (None: none found).
    """

    package: str
    bind: Callable[[dict[str, str], Binding], dict[str, str]]
    env: Callable[[Path, Binding], dict[str, str]]
    reef_entries: tuple[Entry, ...]
    headless: Callable[[str], list[str]]
    args: Callable[[Path, list[str]], list[str]] = _args_as_given
    state_keys: Mapping[str, frozenset[str]] = field(default_factory=dict)
    loaded: tuple[str, ...] = ()
    own_files: tuple[str, ...] = ()
    offline_env: Mapping[str, str] = field(default_factory=dict)
    session_env: SessionEnv = _no_session_env
    traffic: Callable[[Path], tuple[bool, str]] | None = None
    login: Callable[[Mapping[str, str]], Login | None] = _no_login


# The file an install writes beside the harness: what it installed (release, binding, checksums of the files).


def checked_digest(data: bytes, state_keys: frozenset[str] | None = None) -> str:
    """SHA-256 of what must not change in a file: all of it, or for a JSON file the agent edits, all but its keys."""
    if state_keys:
        try:
            value = json.loads(data)
        except ValueError:
            value = None
        if isinstance(value, dict):
            kept = {key: item for key, item in value.items() if key not in state_keys}
            data = json.dumps(kept, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(data).hexdigest()
