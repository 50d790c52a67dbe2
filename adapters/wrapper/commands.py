"""The wrapper's commands besides running the agent: report, request, versions, update and doctor."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from adapters._locate import find_agent, not_found
from adapters.wrapper.canary import canary_line
from adapters.wrapper.installed import TOKEN_FILE, Installed
from adapters.wrapper.login import login_check, own_login
from adapters.wrapper.session import BINARY_ENV, last_session
from reef_client import (
    Activity,
    ApiError,
    DaemonUnreachable,
    ProgressLines,
    ReefClient,
    ReleaseRow,
    RequestProgress,
    Unauthorized,
    follow_request,
    request_outcome,
    request_status,
    small_model_caution,
    wait_again,
    wait_bound,
)
from reef_client.render.versions import HEADERS, request_text, version_cells
from reef_contract import PYTHON_ENV, TOKEN_ENV

VERSION_TIMEOUT_S = 60


def report(installed: Installed, score: float, feedback: str | None) -> int:
    """Score the last session: one report referencing all its receipts (one trajectory, one sample)."""
    name = installed.wrapper
    session = last_session(installed.root)
    if session is None or not session["receipts"]:
        print(f"{name}: no session with recorded model calls to report; run {name} first", file=sys.stderr)
        return 1
    metadata = {"session": session["session"], "release_id": session["release_id"], "adapter": installed.adapter.name}
    with ReefClient(installed.binding.url, installed.token) as client:
        ack = client.report(
            installed.binding.scenario,
            session["receipts"],
            score=score,
            feedback=feedback,
            metadata=metadata,
            agent_record_id=session["session"],
        )
    calls = len(session["receipts"])
    print(f"reported {score:g} for the last session ({calls} model call(s)): report {ack['agent_record_id']}")
    return 0


def request(installed: Installed, text: str, wait: bool, timeout: float | None) -> int:
    """`reef request` for this install's scenario and daemon: file the change request and, with `wait`, follow it
    to the end (its activity on stderr) and say how to install what it publishes. Exit status as `reef request`."""
    binding = installed.binding
    with ReefClient(binding.url, installed.token) as client:
        runtime = client.status()["runtime"]
        caution = small_model_caution(runtime)
        if caution:
            print(f"note: {caution}", file=sys.stderr, flush=True)
        filed = client.file_request(binding.scenario, text)
        request_id = str(filed["agent_record_id"])
        if not wait:
            print(f"request {request_id} queued; its progress: {filed['progress_path']}")
            return 0
        bound = wait_bound(timeout, runtime)
        again = wait_again(request_id, binding.url, _token_file(installed))
        print(
            f"request {request_id} queued; watching it for at most {bound / 60:g} min (--timeout to change; it keeps "
            f"running after that: {again})",
            file=sys.stderr,
            flush=True,
        )
        lines = ProgressLines()

        def show(progress: RequestProgress, new: list[Activity]) -> None:
            for line in lines(progress, new):
                print(line, file=sys.stderr, flush=True)

        progress = follow_request(client, request_id, bound, show)
    print("\n".join(request_outcome(progress, again)))
    status = request_status(progress)
    if status == 0:
        print(f"install the served version with: {installed.wrapper} update")
    return status


def _token_file(installed: Installed) -> Path | None:
    """The install's saved token file where the install's token comes from it (else it is REEF_TOKEN, or none)."""
    saved = installed.root / TOKEN_FILE
    return saved if installed.token and saved.is_file() else None


def versions(installed: Installed, wanted: list[str] | None = None) -> int:
    """The scenario's versions, oldest first, marking the installed and the current one; or, for `vN install`
    (what the in-session /versions passes on), install that version."""
    if wanted:
        if len(wanted) != 2 or wanted[1] != "install":
            print(
                f"{installed.wrapper}: say `versions` or `versions vN install`, not {' '.join(wanted)!r}",
                file=sys.stderr,
            )
            return 2
        return update(installed, wanted[0])
    with ReefClient(installed.binding.url, installed.token) as client:
        rows = client.releases(installed.binding.scenario)
    print(version_table(rows, installed.binding.release_id))
    return 0


def version_table(rows: list[ReleaseRow], installed: str) -> str:
    """The columns of `reef versions`, oldest first, with each request's text under its row."""
    table = [HEADERS]
    notes = []
    for row in reversed(rows):
        table.append(version_cells(row, installed=row["release_id"] == installed))
        notes.append(request_text(row))
    widths = [max(len(line[column]) for line in table) for column in range(len(HEADERS))]
    lines = []
    for index, line in enumerate(table):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
        if index and notes[index - 1]:
            lines.append(f"    {notes[index - 1]}")
    return "\n".join(lines)


def update(installed: Installed, release: str | None) -> int:
    """Fetch the install script (for `release`, else the served version) and run it for this install's root."""
    binding = installed.binding
    with ReefClient(binding.url, installed.token) as client:
        release_id = _release_id(client.releases(binding.scenario), release) if release else None
        script = client.install_script(binding.scenario, installed.adapter.name, release_id)
    env = {PYTHON_ENV: sys.executable}
    if installed.token:
        env[TOKEN_ENV] = installed.token
    # Run from / so the "inside the current directory" refusal never trips over where the person stands.
    done = subprocess.run(
        ["sh", "-s", "--", str(installed.root)], input=script, text=True, cwd="/", env=_with(env), check=False
    )
    return done.returncode


def _release_id(rows: list[ReleaseRow], wanted: str) -> str:
    for row in rows:
        if row["version"] == wanted or (len(wanted) >= 8 and (row["release_id"] or "").startswith(wanted)):
            if not row["release_id"]:
                raise ApiError(400, "not_installable", f"{row['version']} was {row['result']}; nothing to install")
            return str(row["release_id"])
    known = ", ".join(row["version"] for row in reversed(rows) if row["version"])
    raise ApiError(404, "unknown_version", f"no version '{wanted}' (known: {known})")


def doctor(installed: Installed) -> int:
    """One ok/!! line per check: daemon, token, the login a session uses, agent binary, installed vs served release,
    installed files."""
    binding = installed.binding
    checks: list[tuple[bool, str]] = []
    with ReefClient(binding.url, installed.token) as client:
        try:
            client.healthz()
            checks.append((True, f"reef answers at {binding.url}"))
            rows = client.releases(binding.scenario)
            checks.append((True, "the token is accepted" if installed.token else "the daemon needs no token"))
            checks.append(login_check(own_login(installed), client.status()))
            current = next((row for row in rows if row.get("current")), None)
            if current is None or current["release_id"] == binding.release_id:
                checks.append((True, f"installed {installed.sidecar['version']} is the served version"))
            else:
                served = f"{current['version']} is served: {installed.wrapper} update"
                checks.append((False, f"installed {installed.sidecar['version']}; {served}"))
            canary = canary_line(installed, client.canary(binding.scenario))
            if canary is not None:
                checks.append(canary)
        except DaemonUnreachable as exc:
            checks.append((False, str(exc)))
        except Unauthorized:
            checks.append((False, "the daemon refused the token; set REEF_TOKEN and run the install again"))
        except ApiError as exc:
            checks.append((False, exc.message))
    checks.append(_agent_version(installed))
    if installed.adapter.agent.traffic is not None:
        checks.append(installed.adapter.agent.traffic(installed.root))
    changed = installed.changed_files()
    checks.append((not changed, "installed files unchanged" if not changed else f"changed: {', '.join(changed)}"))
    for ok, line in checks:
        print(f"{'ok' if ok else '!!'} {line}")
    return 0 if all(ok for ok, _line in checks) else 1


def _agent_version(installed: Installed) -> tuple[bool, str]:
    agent = installed.adapter
    binary = os.environ.get(BINARY_ENV) or find_agent(agent.binary)
    if not binary:
        return False, not_found(agent.binary, agent.agent.package)
    env = _with(agent.agent.env(installed.root, installed.binding))
    try:
        done = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S, env=env, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{binary} --version failed: {exc}"
    version = (done.stdout.strip() or done.stderr.strip()).splitlines()[:1]
    return done.returncode == 0, f"{agent.binary} {version[0] if version else '(no version)'} at {binary}"


def _with(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **extra}
