"""`reef-<agent> good|bad [words]` inside a session scores that session's last answer as a person would with the
TUI's keys. A stand-in agent asks through reef, then thumbs the answer down the way an in-agent command runs it."""

from __future__ import annotations

import json
import sys

from tests.support.adapters_testing import Reefine

AGENT = """#!{python}
import json, os, subprocess, urllib.request
def ask(text):
    body = json.dumps({{"model": "m", "messages": [{{"role": "user", "content": text}}]}}).encode()
    request = urllib.request.Request(os.environ["REEF_SERVICE_URL"] + "/v1/chat/completions", data=body, headers={{
        "content-type": "application/json", "x-reef-scenario": os.environ["REEF_SCENARIO"],
        "x-reef-tag-session": os.environ["REEF_HARNESS_SESSION"],
        "authorization": "Bearer " + os.environ.get("REEF_TOKEN", "none")}})
    urllib.request.urlopen(request, timeout=60).read()
for text in {asks}:
    ask(text)
thumbed = subprocess.run([os.environ["REEF_HARNESS_WRAPPER"], "bad", "wrong file"], capture_output=True, text=True)
open({out!r}, "w").write(json.dumps([thumbed.returncode, thumbed.stdout, thumbed.stderr]))
"""


def run_session(reefine: Reefine, asks: list[str]) -> tuple[int, str, str]:
    out = reefine.home / "thumbed.json"
    agent = reefine.home / "agent.py"
    agent.write_text(AGENT.format(python=sys.executable, asks=asks, out=str(out)))
    agent.chmod(0o755)
    ran = reefine.wrapper("pi", REEF_HARNESS_BINARY=str(agent))
    assert ran.returncode == 0, ran.stderr
    code, stdout, stderr = json.loads(out.read_text())
    return code, stdout, stderr


def test_bad_in_a_session_scores_its_last_answer_low_with_the_words(reefine: Reefine) -> None:
    assert reefine.install("pi").returncode == 0
    code, stdout, stderr = run_session(reefine, ["open the config", "fix the login"])
    assert code == 0, stderr
    rows = reefine.call("GET", "/reef/records?type=inference")["records"]
    records = [reefine.call("GET", f"/reef/records/{row['id']}") for row in rows]
    earlier, newest = sorted((r for r in records if r["tags"].get("session")), key=lambda r: r["sequence"])
    assert newest["id"] in stdout
    (report,) = newest["reports"]
    scale = reefine.call("GET", "/reef/status")["score_scale"]
    assert (report["source"], report["score"], report["feedback"]) == ("person", scale["min"], "wrong file")
    assert earlier["reports"] == []


def test_thumbs_before_any_answer_says_there_is_none(reefine: Reefine) -> None:
    assert reefine.install("pi").returncode == 0
    code, _, stderr = run_session(reefine, [])
    assert code == 1 and "no answer in this session yet" in stderr
