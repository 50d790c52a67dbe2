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

import hashlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reef_client._client import ApiError, ReefClient
from reef_daemon.contract import OUTCOMES_DIR_ENV

IN_TREE = 0.5  # the share of a session's added lines a tree must hold for the session's changes to be in it
SHORTEST_LINE = 4  # shorter added lines (a brace, `end`) say nothing of whose change it was
GIT_TIMEOUT_S = 30


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
            try:
                text: str | None = (top / path).read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = None
        else:
            text = _git(top, "show", f"{tree}:{path}")
        present = {_digest(line) for line in (text or "").splitlines()}
        total += len(digests)
        found += sum(1 for digest in digests if digest in present)
    return found / total if total else 0.0


def _added_lines(top: Path, base: str | None) -> Iterator[str]:
    """`path\\0hash` of each line the working tree adds over `base` (all lines of untracked files)."""
    if base is not None:
        diff = _git(top, "diff", "--no-color", "--no-ext-diff", "-U0", base, "--") or ""
        path = None
        for line in diff.splitlines():
            if line.startswith("+++ "):
                path = line[6:] if line.startswith("+++ b/") else None
            elif line.startswith("+") and path is not None and len(line[1:].strip()) >= SHORTEST_LINE:
                yield f"{path}\0{_digest(line[1:])}"
    others = _git(top, "ls-files", "--others", "--exclude-standard", "-z") or ""
    tracked = "" if base is not None else (_git(top, "ls-files", "-z") or "")
    for path in filter(None, (others + tracked).split("\0")):
        try:
            text = (top / path).read_text(encoding="utf-8", errors="replace")
        except (OSError, UnicodeDecodeError):
            continue
        for line in text.splitlines():
            if len(line.strip()) >= SHORTEST_LINE:
                yield f"{path}\0{_digest(line)}"


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
            text=True,
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


def scan(client: ReefClient, *, days: float, folder: Path | None = None) -> list[Scanned]:
    """Decide every undecided note and send the outcome reports of those that came to a score; a decided note is
    marked so, and never read against the repository again."""
    scanned = []
    for path, note in notes(folder):
        if note.get("decided"):
            continue
        decision = decide(note, days)
        made = 0
        if decision.place is not None:
            try:
                made = post_outcome(client, note, decision.place, decision.reason, decision.evidence)
            except ApiError as exc:  # a record this daemon does not hold, say: try again on a later scan
                decision = Decision(None, f"the daemon refused the report: {exc.message}", False, decision.evidence)
        if decision.final:
            note["decided"] = {"reason": decision.reason, "place": decision.place, "at": time.time()}
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
