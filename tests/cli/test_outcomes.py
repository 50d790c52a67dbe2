"""`reef outcomes`: sessions scored by what became of their code, on real git repositories made here. Committed and
kept: high; reverted: low; CI failing on the commit that holds the changes: low; a rescan adds nothing; a workspace
that is not git, or a session that changed nothing, adds nothing and says why with --verbose. No code is kept."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from reef_client import MAX_FILE_BYTES, ReefClient, save_note, scan, session_changes, session_start
from reef_client import _outcomes as outcomes
from tests.support.cli_testing import Daemon

CODE = "def login(user):\n    return check_password(user.name, user.secret)\n"
Cli = Callable[..., Result]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def new_repo(tmp_path: Path, name: str) -> Path:
    repo = tmp_path / name
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.invalid")
    git(repo, "config", "user.name", "Dev")
    (repo / "README.md").write_text("# project\nthe first line of it all\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "start")
    return repo


def noted_session(daemon: Daemon, notes: Path, workspace: Path, name: str, change: Callable[[], None]) -> str:
    """A session through reef in `workspace`: one model call, then `change` to its files; its note kept."""
    start = session_start(workspace)
    receipt = daemon.chat("outcomes")
    change()
    note: dict[str, Any] = {
        "session": name,
        "scenario": "outcomes",
        "ended_at": time.time(),
        "receipts": [receipt],
        "git": session_changes(start) if start is not None else None,
    }
    save_note(name, note, notes)
    return receipt


def outcome_reports(daemon: Daemon, receipt: str) -> list[dict[str, Any]]:
    return [r for r in daemon.record(receipt)["reports"] if r["source"] == "outcome"]


def test_committed_and_kept_scores_high_and_a_rescan_adds_nothing(cli: Cli, daemon: Daemon, tmp_path: Path) -> None:
    repo, notes = new_repo(tmp_path, "kept"), tmp_path / "notes"
    receipt = noted_session(daemon, notes, repo, "kept-session", lambda: (repo / "auth.py").write_text(CODE))
    waiting = cli("outcomes", "scan", "--notes", str(notes), "--days", "0", "--verbose")
    assert "not committed yet" in waiting.output and outcome_reports(daemon, receipt) == []

    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "login")
    early = cli("outcomes", "scan", "--notes", str(notes), "--days", "3", "--verbose")
    assert "waiting until it has been kept 3 days" in early.output
    found = cli("outcomes", "scan", "--notes", str(notes), "--days", "0")
    assert found.exit_code == 0, found.output
    assert "1 new outcome report" in found.output
    (report,) = outcome_reports(daemon, receipt)
    assert report["score"] == 1.0 and report["evidence"]["commit"] == git(repo, "rev-parse", "HEAD")
    assert "check_password" not in str(report)  # the code itself is never kept
    assert (daemon.record(receipt)["score"], daemon.record(receipt)["source"]) == (1.0, "outcome")
    shown = cli("show", receipt)
    assert "1 (derived: outcome)" in shown.output and "outcome" in shown.output.split("reports")[-1]
    listed = cli("records", "--scenario", "outcomes")
    assert "1 o" in listed.output  # the score's source letter

    again = cli("outcomes", "scan", "--notes", str(notes), "--days", "0", "--json")
    assert again.exit_code == 0 and again.output.strip() == "[]"  # decided notes are not read again
    assert len(outcome_reports(daemon, receipt)) == 1


def test_a_ci_failure_after_a_kept_scan_lowers_the_score(cli: Cli, daemon: Daemon, tmp_path: Path) -> None:
    repo, notes = new_repo(tmp_path, "kept-then-failed"), tmp_path / "notes"
    receipt = noted_session(daemon, notes, repo, "late-failure", lambda: (repo / "auth.py").write_text(CODE))
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "login")
    assert "1 new outcome report" in cli("outcomes", "scan", "--notes", str(notes), "--days", "0").output
    assert daemon.record(receipt)["score"] == 1.0

    sha = git(repo, "rev-parse", "HEAD")
    failed = cli("outcomes", "report", "--commit", sha, "--ci", "fail", "--repo", str(repo), "--notes", str(notes))
    assert failed.exit_code == 0 and "1 new outcome report" in failed.output, failed.output
    assert (daemon.record(receipt)["score"], daemon.record(receipt)["source"]) == (0.0, "outcome")
    assert [report["score"] for report in outcome_reports(daemon, receipt)] == [1.0, 0.0]


def test_reverted_changes_score_low(cli: Cli, daemon: Daemon, tmp_path: Path) -> None:
    repo, notes = new_repo(tmp_path, "reverted"), tmp_path / "notes"

    def write_and_commit() -> None:
        (repo / "auth.py").write_text(CODE)
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", "login")

    receipt = noted_session(daemon, notes, repo, "reverted-session", write_and_commit)
    git(repo, "revert", "--no-edit", "HEAD")
    found = cli("outcomes", "scan", "--notes", str(notes), "--days", "0")
    assert found.exit_code == 0, found.output
    (report,) = outcome_reports(daemon, receipt)
    assert report["score"] == 0.0 and report["feedback"].startswith("reverted")


def test_ci_failing_on_the_commit_scores_low(cli: Cli, daemon: Daemon, tmp_path: Path) -> None:
    repo, notes = new_repo(tmp_path, "ci"), tmp_path / "notes"
    receipt = noted_session(daemon, notes, repo, "ci-session", lambda: (repo / "auth.py").write_text(CODE))
    other = noted_session(daemon, notes, repo, "ci-other", lambda: None)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "login")
    sha = git(repo, "rev-parse", "HEAD")
    done = cli("outcomes", "report", "--commit", sha, "--ci", "fail", "--repo", str(repo), "--notes", str(notes))
    assert done.exit_code == 0, done.output
    (report,) = outcome_reports(daemon, receipt)
    assert report["score"] == 0.0 and report["evidence"] == {"commit": sha, "ci": "fail", "files": 1,
                                                             "session": "ci-session"}  # fmt: skip
    assert outcome_reports(daemon, other) == []
    repeated = cli("outcomes", "report", "--commit", sha, "--ci", "fail", "--repo", str(repo), "--notes", str(notes))
    assert "0 new outcome report" in repeated.output  # the same outcome again adds nothing
    missing = cli("outcomes", "report", "--commit", "nope", "--ci", "pass", "--repo", str(repo), "--notes", str(notes))
    assert missing.exit_code == 1 and "holds no commit nope" in missing.output


def test_a_workspace_without_git_or_a_session_without_changes_adds_nothing(
    cli: Cli, daemon: Daemon, tmp_path: Path
) -> None:
    plain, notes = tmp_path / "plain", tmp_path / "notes"
    plain.mkdir()
    loose = noted_session(daemon, notes, plain, "a-plain-session", lambda: (plain / "auth.py").write_text(CODE))
    repo = new_repo(tmp_path, "idle")
    idle = noted_session(daemon, notes, repo, "b-idle-session", lambda: None)
    found = cli("outcomes", "scan", "--notes", str(notes), "--days", "0", "--verbose")
    assert found.exit_code == 0, found.output
    assert "a-plain-session: no report: the session's workspace is not a git repository" in found.output
    assert "b-idle-session: no report: the session changed nothing in its repository" in found.output
    assert outcome_reports(daemon, loose) == [] and outcome_reports(daemon, idle) == []


def test_a_note_reads_only_regular_files_within_the_bound(tmp_path: Path) -> None:
    repo = new_repo(tmp_path, "hostile")
    start = session_start(repo)
    assert start is not None
    (repo / "auth.py").write_text(CODE)
    (repo / "zero").symlink_to("/dev/zero")  # read whole, a link to it never ends
    (repo / "secrets.py").symlink_to(tmp_path / "outside.py")
    (tmp_path / "outside.py").write_text("TOKEN = 'kept outside the repository'\n")
    os.mkfifo(repo / "pipe")  # opening it for reading would wait for a writer
    assert session_changes(start)["files"] == ["auth.py"]


def test_a_file_over_the_bound_is_left_out_and_reading_stops_at_the_total(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = new_repo(tmp_path, "large")
    start = session_start(repo)
    assert start is not None
    line = "generated = [1, 2, 3, 4, 5, 6, 7, 8, 9]\n"
    (repo / "generated.py").write_text(line * (MAX_FILE_BYTES // len(line) + 1))
    (repo / "a.py").write_text(CODE)
    assert session_changes(start)["files"] == ["a.py"]

    monkeypatch.setattr(outcomes, "MAX_READ_BYTES", len(CODE) * 3)
    (repo / "b.py").write_text(CODE.replace("login", "logout"))
    (repo / "c.py").write_text(CODE.replace("login", "signup"))
    assert session_changes(start)["files"] == ["a.py", "b.py"]  # c.py is past what one session may read


def test_files_with_non_ascii_names_are_noted(tmp_path: Path) -> None:
    repo = new_repo(tmp_path, "unicode")
    (repo / "naïve.py").write_text("print('the first version')\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "naive")
    start = session_start(repo)
    assert start is not None
    (repo / "naïve.py").write_text("print('the first version')\nprint('a second line')\n")
    (repo / "café.py").write_text(CODE)
    (repo / 'a "quoted" name.py').write_text(CODE)
    assert session_changes(start)["files"] == ['a "quoted" name.py', "café.py", "naïve.py"]


def test_a_refused_report_is_kept_with_its_reason_and_not_sent_again(cli: Cli, daemon: Daemon, tmp_path: Path) -> None:
    repo, notes = new_repo(tmp_path, "refused"), tmp_path / "notes"
    start = session_start(repo)
    assert start is not None
    (repo / "auth.py").write_text(CODE)
    note = {"session": "refused-session", "scenario": "outcomes", "ended_at": 0, "receipts": ["0" * 32],
            "git": session_changes(start)}  # fmt: skip
    save_note("refused-session", note, notes)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "login")
    first = cli("outcomes", "scan", "--notes", str(notes), "--days", "0", "--verbose")
    assert "refused-session: no report: the daemon refused the report" in first.output, first.output
    kept = json.loads((notes / "refused-session.json").read_text())
    assert kept["decided"]["reason"].startswith("the daemon refused the report")
    again = cli("outcomes", "scan", "--notes", str(notes), "--days", "0", "--json")
    assert again.exit_code == 0 and again.output.strip() == "[]"


def test_an_undecided_note_is_read_again_only_after_the_recheck_interval(daemon: Daemon, tmp_path: Path) -> None:
    repo, notes = new_repo(tmp_path, "waiting"), tmp_path / "notes"
    noted_session(daemon, notes, repo, "waiting-session", lambda: (repo / "auth.py").write_text(CODE))
    with ReefClient(daemon.url) as client:
        (first,) = scan(client, days=0, folder=notes, recheck_after_s=3600)
        assert "not committed yet" in first.decision.reason
        assert scan(client, days=0, folder=notes, recheck_after_s=3600) == []
        (read_again,) = scan(client, days=0, folder=notes)
    assert read_again.session == "waiting-session"
