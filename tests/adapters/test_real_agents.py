"""Real agents through their wrappers against reef (fake upstream): one headless prompt each, recorded under the
scenario with the session tag, scored by `report`; a published skill shows up after `update`; and pi's /reefine
and /versions inside a real pi session (print mode)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support.adapters_testing import SCENARIO, Reefine
from tests.support.fake_proposer_model import answer, skill
from tests.support.fixtures import FindAgent

# adapter -> (binary, headless arguments for one prompt, where a published skill lands)
AGENTS = {
    "pi": ("pi", ["-p", "What is the capital of France?"], "pi-agent/skills/{name}/SKILL.md"),
    "codex": (
        "codex",
        ["exec", "--skip-git-repo-check", "What is the capital of France?"],
        "codex/skills/{name}/SKILL.md",
    ),
    "dsh": ("dsh", ["headless", "What is the capital of France?"], "dsh/skills/{name}/SKILL.md"),
}


def said(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


@pytest.mark.parametrize("adapter", list(AGENTS))
def test_a_session_is_recorded_reported_and_updated(reefine: Reefine, adapter: str, agent_cli: FindAgent) -> None:
    binary, prompt, skill_path = AGENTS[adapter]
    agent_cli(binary)
    assert reefine.install(adapter).returncode == 0
    ran = reefine.wrapper(adapter, *prompt)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "Paris" in ran.stdout and "1 model call(s) of this session are recorded" in ran.stderr

    rows = reefine.call("GET", "/reef/records", scenario=SCENARIO, type="inference")["records"]
    record = reefine.call("GET", f"/reef/records/{rows[0]['id']}")
    sidecar = json.loads((reefine.root(adapter) / ".reef-harness-release").read_text())
    assert len(record["tags"]["session"]) == 32 and record["tags"]["release"] == sidecar["release_id"]

    reported = reefine.wrapper(adapter, "report", "--score", "0.9", "--feedback", "right answer")
    assert reported.returncode == 0 and "reported 0.9 for the last session (1 model call(s))" in reported.stdout
    report_id = reported.stdout.rsplit("report ", 1)[1].strip()
    report = reefine.call("GET", f"/reef/records/{report_id}")
    assert report["score"] == 0.9 and report["references"] == [rows[0]["id"]]

    reefine.publish_skill("haiku", "# Haiku\nAnswer in a haiku.")
    versions = reefine.wrapper(adapter, "versions")
    assert versions.returncode == 0 and "installed" in versions.stdout.splitlines()[1]
    updated = reefine.wrapper(adapter, "update")
    assert updated.returncode == 0 and "harness v1" in updated.stdout, updated.stderr
    assert "Answer in a haiku." in (reefine.root(adapter) / skill_path.format(name="haiku")).read_text()
    doctor = reefine.wrapper(adapter, "doctor")
    assert doctor.returncode == 0 and "ok installed v1 is the served version" in doctor.stdout, doctor.stdout


def test_pi_reefine_and_versions_inside_a_session(reefine: Reefine, agent_cli: FindAgent) -> None:
    agent_cli("pi")
    assert reefine.install("pi").returncode == 0
    reefine.upstream.proposer.script(
        "answer", answer("A haiku skill.\n\nHow to use: ask for a haiku.", skill("haiku", "# Haiku\nIn 5-7-5."))
    )
    # In print mode pi keeps stdout for the answer; what the extension says may land on either stream.
    filed = said(reefine.wrapper("pi", "-p", "/reefine answer every question with a haiku"))
    assert "filed" in filed and "reef: selected: v1" in filed
    assert "How to use: ask for a haiku." in filed and "/versions v1 install" in filed
    train = reefine.call("GET", "/reef/records", scenario=SCENARIO, type="train")["records"][0]
    assert reefine.call("GET", f"/reef/records/{train['id']}")["text"] == "answer every question with a haiku"

    listed = said(reefine.wrapper("pi", "-p", "/versions"))
    lines = listed[listed.index("version  ") :].splitlines()
    assert lines[0].split() == ["version", "release", "operation", "result", "status"]
    assert lines[1].startswith("v0") and "installed" in lines[1] and lines[2].startswith("v1") and "current" in lines[2]
    assert "answer every question with a haiku" in listed
    assert "v1 of this harness is served" in listed  # the notice at session start

    installed = said(reefine.wrapper("pi", "-p", "/versions v1 install"))
    assert "installed v1" in installed and "Type /reload" in installed
    assert "In 5-7-5." in (reefine.root() / "pi-agent" / "skills" / "haiku" / "SKILL.md").read_text()


def test_pi_bad_inside_a_session_scores_its_last_answer(reefine: Reefine, agent_cli: FindAgent) -> None:
    """pi in print mode takes its messages in turn: a question, then `/bad wrong file`, which the extension runs as
    `reef-pi bad` in the same session."""
    agent_cli("pi")
    assert reefine.install("pi").returncode == 0
    shown = said(reefine.wrapper("pi", "-p", "where is the login handled?", "/bad wrong file"))
    rows = reefine.call("GET", "/reef/records", scenario=SCENARIO, type="inference")["records"]
    (answered,) = [reefine.call("GET", f"/reef/records/{row['id']}") for row in rows]
    assert "scored the last answer" in shown and answered["id"] in shown
    (report,) = answered["reports"]
    scale = reefine.call("GET", "/reef/status")["score_scale"]
    assert (report["source"], report["score"], report["feedback"]) == ("person", scale["min"], "wrong file")
