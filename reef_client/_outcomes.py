"""What happened to the code a session wrote: the wrappers note a session's git changes when it ends, and later
(`reef outcomes scan`, the wrapper's next start, a CI step's `reef outcomes report`) the notes are read against the
repository to give the session's records `outcome` reports.

A note keeps no code: the changes are the files the session touched and a hash of each line it added (a line that
was already changed when the session started is not its own). A session's changes are *in* a tree when at least
half of those hashes are found in that tree's files. Against HEAD and the working tree, a note is decided:

- committed, and still in HEAD after `days` days: kept, a high score;
- in neither HEAD nor the working tree any more: reverted (or thrown away), a low score;
- otherwise (not committed yet, or committed too recently) it waits for a later scan.

`reef outcomes report --commit SHA --ci pass|fail` gives the sessions whose changes are in that commit a high or
low score. An outcome report with the score a record already has from its outcome adds nothing (a rescan, a CI
run repeated); one with another score is a new report that replaces it (CI failed after a scan found it kept). A
workspace that is not a git repository, or a session that changed nothing, gives no report, and the reason is kept.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reef_client._client import ApiError, ReefClient
from reef_contract import OUTCOMES_DIR_ENV

IN_TREE = 0.5  # the share of a session's added lines a tree must hold for the session's changes to be in it
SHORTEST_LINE = 4  # shorter added lines (a brace, `end`) say nothing of whose change it was
GIT_TIMEOUT_S = 30
# What is read of a workspace's files: a larger file (generated code, data) is left out of a note, as are links and
# anything that is not a regular file; reading stops once this much has been read of one session's files.
MAX_FILE_BYTES = 1024 * 1024
MAX_READ_BYTES = 64 * 1024 * 1024


def notes_dir() -> Path:
    """Where the wrappers keep session notes: $REEF_OUTCOMES_DIR, else ~/.reef/outcomes."""
    named = os.environ.get(OUTCOMES_DIR_ENV, "").strip()
    return Path(named).expanduser() if named else Path.home() / ".reef" / "outcomes"


@dataclass(frozen=True)
class GitStart:
    """A workspace as a session found it: its repository, HEAD, and the lines already changed."""

    repo: str
    head: str | None
    dirty: frozenset[str]


def session_start(workspace: Path) -> GitStart | None:
    """The workspace's repository as the session starts; None when it is not in a git repository."""
    repo = _git(workspace, "rev-parse", "--show-toplevel")
    if repo is None:
        return None
    top = Path(repo.strip())
    head = _head(top)
    return GitStart(str(top), head, frozenset(_added_lines(top, head)))


def session_changes(start: GitStart) -> dict[str, Any]:
    """What the session changed since `start`: files, line hashes per file, a fingerprint, HEAD before and after."""
    top = Path(start.repo)
    head = _head(top)
    added: dict[str, list[str]] = {}
    for item in _added_lines(top, start.head):
        if item not in start.dirty:
            path, digest = item.split("\0")
            added.setdefault(path, []).append(digest)
    fingerprint = hashlib.sha256(json.dumps(added, sort_keys=True).encode()).hexdigest()[:16] if added else None
    return {
        "repo": start.repo,
        "head_before": start.head,
        "head_after": head,
        "files": sorted(added),
        "fingerprint": fingerprint,
        "added": added,
    }


def save_note(session: str, note: dict[str, Any], folder: Path | None = None) -> Path:
    """Keep a session's note for later scans."""
    folder = folder or notes_dir()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{session}.json"
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps(note, indent=2) + "\n", encoding="utf-8")
    partial.replace(target)
    return target


def notes(folder: Path | None = None) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every kept note, oldest first."""
    for path in sorted((folder or notes_dir()).glob("*.json")):
        try:
            yield path, json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue


@dataclass(frozen=True)
class Decision:
    """What a note comes to now: a place on the scale (0 worst, 1 best) and why, or no report yet (place None)
    and why not; `final` when no later scan will change it."""

    place: float | None
    reason: str
    final: bool
    evidence: dict[str, Any]


def decide(note: dict[str, Any], days: float, now: float | None = None) -> Decision:
    """What HEAD and the working tree say of a session's changes now."""
    git = note.get("git")
    if not git:
        return Decision(None, "the session's workspace is not a git repository", True, {})
    added: dict[str, list[str]] = git.get("added") or {}
    if not added:
        return Decision(None, "the session changed nothing in its repository", True, {})
    top = Path(git["repo"])
    head = _head(top) if top.is_dir() else None
    if head is None:
        return Decision(None, f"{top} is no longer a git repository with commits", True, {})
    evidence = {"commit": head, "files": len(added), "fingerprint": git.get("fingerprint")}
    in_head = _share_in(top, head, added)
    age_days = ((now or time.time()) - float(note.get("ended_at") or 0)) / 86400
    if in_head >= IN_TREE:
        if age_days >= days:
            kept = f"committed, and {in_head:.0%} of its added lines are still in HEAD after {age_days:.1f} days"
            return Decision(1.0, kept, True, {**evidence, "kept": round(in_head, 3)})
        return Decision(None, f"committed; waiting until it has been kept {days:g} days", False, evidence)
    if _share_in(top, None, added) >= IN_TREE:
        return Decision(None, "its changes are in the working tree, not committed yet", False, evidence)
    gone = "reverted" if head != git.get("head_after") else "thrown away before it was committed"
    return Decision(0.0, f"{gone}: its changes are in neither HEAD nor the working tree", True, evidence)


def in_commit(note: dict[str, Any], commit: str) -> bool:
    """Whether a session's changes are in `commit` (of the note's repository)."""
    git = note.get("git") or {}
    added = git.get("added") or {}
    return bool(added) and _share_in(Path(git["repo"]), commit, added) >= IN_TREE


def repo_of(workspace: Path) -> str | None:
    """The top of the git repository holding `workspace`."""
    found = _git(workspace, "rev-parse", "--show-toplevel")
    return found.strip() if found else None


def resolve_commit(repo: Path, commit: str) -> str | None:
    """The full id of a commit, or None when the repository has none of that name."""
    found = _git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    return found.strip() if found else None


def post_outcome(client: ReefClient, note: dict[str, Any], place: float, reason: str, evidence: dict[str, Any]) -> int:
    """One outcome report per record of the session, on the deployment's scale; how many were new."""
    scale = client.status()["score_scale"]
    score = scale["min"] + place * (scale["max"] - scale["min"])
    made = 0
    for receipt in note.get("receipts") or []:
        ack = client.report(
            str(note["scenario"]),
            [receipt],
            score=score,
            feedback=reason,
            metadata={"session": note.get("session")},
            source="outcome",
            evidence={**evidence, "session": note.get("session")},
        )
        made += int(ack["created"])
    return made


def _share_in(top: Path, tree: str | None, added: dict[str, list[str]]) -> float:
    """The share of the hashed lines found in `tree`'s files (None: the working tree)."""
    total = found = 0
    for path, digests in added.items():
        if tree is None:
            raw = _read_regular_file(top / path, MAX_FILE_BYTES)
            text = raw.decode("utf-8", errors="replace") if raw is not None else None
        else:
            text = _git(top, "show", f"{tree}:{path}")
        present = {_digest(line) for line in (text or "").splitlines()}
        total += len(digests)
        found += sum(1 for digest in digests if digest in present)
    return found / total if total else 0.0


def _added_lines(top: Path, base: str | None) -> Iterator[str]:
    """`path\\0hash` of each line the working tree adds over `base` (all lines of untracked files)."""
    if base is not None:
        diff = _git(top, "-c", "core.quotePath=false", "diff", "--no-color", "--no-ext-diff", "-U0", base, "--") or ""
        path = None
        for line in diff.splitlines():
            if line.startswith("+++ "):
                name = _unquoted(line[4:])
                path = name[2:] if name.startswith("b/") else None
            elif line.startswith("+") and path is not None and len(line[1:].strip()) >= SHORTEST_LINE:
                yield f"{path}\0{_digest(line[1:])}"
    others = _git(top, "ls-files", "--others", "--exclude-standard", "-z") or ""
    tracked = "" if base is not None else (_git(top, "ls-files", "-z") or "")
    budget = MAX_READ_BYTES
    for path in filter(None, (others + tracked).split("\0")):
        raw = _read_regular_file(top / path, min(MAX_FILE_BYTES, budget))
        if raw is None:
            continue
        budget -= len(raw)
        for line in raw.decode("utf-8", errors="replace").splitlines():
            if len(line.strip()) >= SHORTEST_LINE:
                yield f"{path}\0{_digest(line)}"


def _read_regular_file(path: Path, limit: int) -> bytes | None:
    """The bytes of a regular file of at most `limit` bytes; None for a larger one, a symbolic link (never
    followed), a device, a pipe or a folder, and for one that cannot be opened."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as file:
        try:
            info = os.fstat(descriptor)
            if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
                return None
            data = file.read(limit + 1)
        except OSError:
            return None
    return data if len(data) <= limit else None


def _unquoted(name: str) -> str:
    """A path as `git diff` prints it: in double quotes, with C escapes, when it holds a quote, a backslash or a
    control character."""
    if len(name) < 2 or not (name.startswith('"') and name.endswith('"')):
        return name
    unescaped: bytes = codecs.escape_decode(name[1:-1].encode("utf-8"))[0]
    return unescaped.decode("utf-8", errors="replace")


def _digest(line: str) -> str:
    return hashlib.sha256(line.strip().encode()).hexdigest()[:16]


def _head(top: Path) -> str | None:
    found = _git(top, "rev-parse", "--verify", "--quiet", "HEAD")
    return found.strip() if found else None


def _git(where: Path, *args: str) -> str | None:
    """A git command's output, or None when git fails (not a repository, no such object) or is missing."""
    try:
        done = subprocess.run(
            ["git", "-C", str(where), *args],
            capture_output=True,
            encoding="utf-8",
            errors="replace",
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


@dataclass(frozen=True)
class Scanned:
    """What a scan made of one note: the decision, and how many reports it added."""

    session: str
    decision: Decision
    reports: int


def scan(client: ReefClient, *, days: float, folder: Path | None = None, recheck_after_s: float = 0.0) -> list[Scanned]:
    """Decide every undecided note (but those read within `recheck_after_s`) and send the outcome reports of those
    that came to a score. A decided note is marked so, and never read against the repository again; so is one
    whose report the daemon refused (a record it does not hold, say), with the daemon's reason."""
    scanned = []
    now = time.time()
    for path, note in notes(folder):
        if note.get("decided") or now - float(note.get("checked_at") or 0) < recheck_after_s:
            continue
        decision = decide(note, days)
        made = 0
        if decision.place is not None:
            try:
                made = post_outcome(client, note, decision.place, decision.reason, decision.evidence)
            except ApiError as exc:
                refused = exc.status < 500  # a daemon that failed, rather than refused, is asked again later
                said = f"the daemon {'refused' if refused else 'failed on'} the report: {exc.message}"
                decision = Decision(None, said, refused, decision.evidence)
        if decision.final:
            note["decided"] = {"reason": decision.reason, "place": decision.place, "at": now}
        else:
            note["checked_at"] = now
        save_note(str(note.get("session") or path.stem), note, path.parent)
        scanned.append(Scanned(str(note.get("session") or path.stem), decision, made))
    return scanned


def report_ci(
    client: ReefClient, repo: Path, commit: str, passed: bool, *, folder: Path | None = None
) -> list[Scanned]:
    """Give the sessions whose changes are in `commit` (of `repo`) a high score when its CI passed, low when not."""
    top = repo_of(repo)
    full = resolve_commit(repo, commit) if top else None
    if top is None or full is None:
        raise ValueError(f"{repo} holds no commit {commit}" if top else f"{repo} is not in a git repository")
    outcome = "passed" if passed else "failed"
    scanned = []
    for path, note in notes(folder):
        if (note.get("git") or {}).get("repo") != top or not in_commit(note, full):
            continue
        reason = f"CI {outcome} on commit {full[:12]}, which holds the session's changes"
        evidence = {"commit": full, "ci": "pass" if passed else "fail", "files": len(note["git"]["added"])}
        decision = Decision(1.0 if passed else 0.0, reason, True, evidence)
        made = post_outcome(client, note, 1.0 if passed else 0.0, reason, evidence)
        scanned.append(Scanned(str(note.get("session") or path.stem), decision, made))
    return scanned
