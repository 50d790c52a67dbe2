"""The wrapper notes what a session changed in its git repository when it ends (files and hashes of the added
lines, never the code), and `reef outcomes scan` turns the committed change into an outcome report on the
session's records. A stand-in agent makes one model call through reef and writes a file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.adapters_testing import Reefine
from tests.support.cli_testing import clean_env, run_reef

AGENT = """#!{python}
import json, os, urllib.request
body = json.dumps({{"model": "m", "messages": [{{"role": "user", "content": "write the login"}}]}}).encode()
request = urllib.request.Request(os.environ["REEF_SERVICE_URL"] + "/v1/chat/completions", data=body, headers={{
    "content-type": "application/json", "x-reef-scenario": os.environ["REEF_SCENARIO"],
    "x-reef-tag-session": os.environ["REEF_HARNESS_SESSION"],
    "authorization": "Bearer " + os.environ.get("REEF_TOKEN", "none")}})
urllib.request.urlopen(request, timeout=60).read()
open("auth.py", "w").write("def login(user):\\n    return check_password(user.name, user.secret)\\n")
"""


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=Dev", "-c", "user.email=dev@example.invalid", *args],
                   check=True, capture_output=True)  # fmt: skip


def test_a_sessions_committed_change_becomes_an_outcome_report(reefine: Reefine, tmp_path: Path) -> None:
    assert reefine.install("pi").returncode == 0
    project = reefine.home / "project"
    project.mkdir(exist_ok=True)
    git(project, "init", "-q", "-b", "main")
    (project / "README.md").write_text("# project\n")
    git(project, "add", ".")
    git(project, "commit", "-q", "-m", "start")
    agent = reefine.home / "agent.py"
    agent.write_text(AGENT.format(python=sys.executable))
    agent.chmod(0o755)

    ran = reefine.wrapper("pi", REEF_HARNESS_BINARY=str(agent))
    assert ran.returncode == 0, ran.stderr
    (note_file,) = (reefine.home / ".reef" / "outcomes").glob("*.json")
    note = json.loads(note_file.read_text())
    assert note["git"]["files"] == ["auth.py"] and len(note["receipts"]) == 1
    assert note["git"]["repo"] == str(project) and note["git"]["head_before"] == note["git"]["head_after"]
    assert "check_password" not in note_file.read_text()  # hashes of the lines, not the lines

    git(project, "add", ".")
    git(project, "commit", "-q", "-m", "login")
    env = clean_env(HOME=str(reefine.home))
    scanned = run_reef(tmp_path, env, "outcomes", "scan", "--days", "0", "--url", reefine.url)
    assert scanned.returncode == 0, scanned.stderr
    assert "1 new outcome report" in scanned.stdout
    record = reefine.call("GET", f"/reef/records/{note['receipts'][0]}")
    (report,) = record["reports"]
    assert (report["source"], report["score"], record["source"]) == ("outcome", 1.0, "outcome")
