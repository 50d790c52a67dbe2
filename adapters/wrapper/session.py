"""Running the agent: refuse a changed install, start the agent pointed at it with a session tag, and keep the
receipts of the session's model calls for `report`."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from adapters._agent import SESSION_ENV
from adapters._locate import find_agent, not_found
from adapters.wrapper.canary import session_install
from adapters.wrapper.installed import NOT_INSTALLED, ROOT_ENV, Installed
from adapters.wrapper.login import carried_login
from reef_client import GitStart, ReefClient, ReefClientError, save_note, scan, session_changes, session_start
from reef_contract import CANARY_DIR, TOKEN_ENV

SESSIONS = ".reef-sessions"
BINARY_ENV = "REEF_HARNESS_BINARY"
EXIT_CHANGED = 3
EXIT_NO_AGENT = 127
NO_TOKEN = "none"  # noqa: S105 - agents want some key; a daemon without auth ignores it
PAGE = 500
KEPT_DAYS = 7.0  # committed changes still in HEAD after this long count as kept (as `reef outcomes scan`)
RECHECK_S = 86400.0  # a start reads an undecided note against its repository at most once a day


def run(installed: Installed, args: list[str]) -> int:
    """Start the agent on the install; the agent's exit status, or 3 when the installed files changed."""
    name = installed.wrapper
    canary = installed.canary
    changed = installed.changed_files()
    if canary is not None:  # the canary's digests were checked above; here what was added where it loads from
        changed += [f"{CANARY_DIR}/{path}" for path in canary.changed_files() if path.endswith(NOT_INSTALLED)]
    if changed:
        added = " and remove the files reef did not install" if any(c.endswith(NOT_INSTALLED) for c in changed) else ""
        print(
            f"{name}: these installed files changed since the install: {', '.join(changed)}. {name} starts only "
            f"the harness reef installed; put it back with `{name} update` (or run the install script again){added}.",
            file=sys.stderr,
        )
        return EXIT_CHANGED
    agent = installed.adapter
    binary = os.environ.get(BINARY_ENV) or find_agent(agent.binary)
    if not binary:
        print(f"{name}: {not_found(agent.binary, agent.agent.package)}", file=sys.stderr)
        return EXIT_NO_AGENT
    session = uuid.uuid4().hex
    workspace = session_start(Path.cwd())
    with ReefClient(installed.binding.url, installed.token) as client:
        _score_earlier_outcomes(client)
        # The tree this session runs, chosen once: its binding tags every model call with its release.
        chosen, why = session_install(installed, client, session)
        if why:
            print(f"{name}: {why}", file=sys.stderr)
        binding = chosen.binding
        login = carried_login(installed, client)
        newest = client.records(scenario=binding.scenario, limit=1)["records"]
        start = newest[0]["sequence"] if newest else 0
        env = {
            **os.environ,
            **agent.agent.env(chosen.root, binding),
            TOKEN_ENV: installed.token or NO_TOKEN,
            SESSION_ENV: session,
            **agent.agent.session_env(binding, session, installed.token or NO_TOKEN, login),
            ROOT_ENV: str(installed.root),
            "REEF_SERVICE_URL": binding.url,
            "REEF_SCENARIO": binding.scenario,
            "REEF_HARNESS_WRAPPER": str(installed.root / name),
            "REEF_HARNESS_RELEASE": binding.release_id,
        }
        started = time.time()
        code = _run_agent([binary, *agent.agent.args(chosen.root, args)], env)
        receipts = session_receipts(client, binding.scenario, session, start)
    _save(installed.root, session, started, code, receipts, chosen.sidecar, canary=chosen is not installed)
    if receipts:
        _note_outcome(session, binding.scenario, started, receipts, workspace)
    if receipts:
        print(
            f"{name}: {len(receipts)} model call(s) of this session are recorded in reef; score them with "
            f"`{name} report --score <number> [--feedback <text>]`",
            file=sys.stderr,
        )
    return code


def _score_earlier_outcomes(client: ReefClient) -> None:
    """Earlier sessions' changes, read against their repositories now (those not read in the last day): those
    decided get their outcome reports. Never a reason not to start the agent."""
    with contextlib.suppress(ReefClientError, OSError):
        scan(client, days=KEPT_DAYS, recheck_after_s=RECHECK_S)


def _note_outcome(session: str, scenario: str, started: float, receipts: list[str], workspace: GitStart | None) -> None:
    """Keep what the session changed in its git repository (no code: files and hashes of added lines), for the
    outcome reports a later scan gives its records. A session outside git, or one that changed nothing, leaves no
    note (nothing could come of it) and writes nothing in the home folder."""
    changes = session_changes(workspace) if workspace is not None else None
    if changes is None or not changes["files"]:
        return
    note = {
        "session": session,
        "scenario": scenario,
        "started_at": started,
        "ended_at": time.time(),
        "receipts": receipts,
        "git": changes,
    }
    try:
        save_note(session, note)
    except OSError as exc:
        print(f"reef: could not keep this session's outcome note: {exc}", file=sys.stderr)


def _run_agent(argv: list[str], env: dict[str, str]) -> int:
    """Run the agent in the foreground. Ctrl-C reaches it directly (same process group); wait for it to end."""
    process = subprocess.Popen(argv, env=env)
    while True:
        try:
            return process.wait()
        except KeyboardInterrupt:
            continue


def session_receipts(client: ReefClient, scenario: str, session: str, after: int) -> list[str]:
    """Receipts of the inference records after `after` that carry this session's tag, oldest first."""
    receipts = []
    cursor: int | None = after
    while cursor is not None:
        page = client.records(scenario=scenario, type="inference", after=cursor, limit=PAGE)
        for row in page["records"]:
            if client.record(row["id"]).get("tags", {}).get("session") == session:
                receipts.append(row["id"])
        cursor = page["next_after"] if len(page["records"]) == PAGE else None
    return receipts


def _save(
    root: Path, session: str, started: float, code: int, receipts: list[str], sidecar: dict[str, Any], *, canary: bool
) -> None:
    """Keep the session: its receipts, and the release (served or canary) that ran it."""
    folder = root / SESSIONS
    folder.mkdir(exist_ok=True)
    record = {
        "session": session,
        "started_at": started,
        "ended_at": time.time(),
        "exit_code": code,
        "release_id": sidecar["release_id"],
        "version": sidecar["version"],
        "canary": canary,
        "receipts": receipts,
    }
    target = folder / f"{int(started * 1000):015d}-{session}.json"
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    partial.replace(target)


def last_session(root: Path) -> dict[str, Any] | None:
    """The newest session this install kept, if any."""
    files = sorted((root / SESSIONS).glob("*.json"))
    if not files:
        return None
    found: dict[str, Any] = json.loads(files[-1].read_text(encoding="utf-8"))
    return found
