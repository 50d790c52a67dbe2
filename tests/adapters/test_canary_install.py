"""A canary on a person's machine: the install holds the served tree and the canary's (each bound to its own
release), the wrapper picks one per session (stable: the session's hash against the share) and runs the agent on
it, and a canary the daemon no longer runs is never picked again, before any update; an update then removes it.
A stand-in agent writes down which release and agent directory each session got."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from adapters.wrapper.canary import in_canary
from adapters.wrapper.session import SESSIONS
from reef_contract import CANARY_DIR, INSTALL_SIDECAR
from tests.support.adapters_testing import SCENARIO, Reefine
from tests.support.fake_proposer_model import answer
from tests.support.waiting import eventually_sync

EXTENSION = {"id": "bell", "kind": "extension", "config": {"name": "bell", "code": "export default () => {}\n"}}


def pending_extension(reefine: Reefine) -> str:
    """A release that waits for review (an extension); its id."""
    reefine.upstream.proposer.script("answer", answer("Bell.\n\nHow to use: it rings.", EXTENSION))
    filed = reefine.call("POST", "/reef/train", {"text": "ring a bell"})
    progress: dict[str, Any] = eventually_sync(
        lambda: reefine.call("GET", f"/reef/requests/{filed['agent_record_id']}"),
        60,
        "the extension request to settle",
        satisfied=lambda request: request["state"] == "settled",
    )
    assert progress["result"] == "pending", progress
    return str(progress["release"])


def sessions(root: Path) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted((root / SESSIONS).glob("*.json"))]


def test_the_wrapper_runs_the_canary_for_its_share_of_sessions(reefine: Reefine) -> None:
    served = str(reefine.publish_skill("brief", "# Brief\nBe brief.")["release"])
    canary = pending_extension(reefine)
    reefine.call("POST", f"/reef/scenarios/{SCENARIO}/canary", {"release_id": canary, "share": 50})
    assert reefine.install("pi").returncode == 0
    root = reefine.root()
    sidecar = json.loads((root / INSTALL_SIDECAR).read_text())
    assert (sidecar["release_id"], sidecar["canary_release_id"], sidecar["canary_share"]) == (served, canary, 50.0)
    # Each tree's model binding names its own release, so its sessions' records are tagged with it.
    assert served in (root / "pi-agent" / "models.json").read_text()
    assert canary in (root / CANARY_DIR / "pi-agent" / "models.json").read_text()
    assert (root / CANARY_DIR / "pi-agent" / "extensions" / "bell.ts").exists()

    seen = reefine.home / "seen.txt"
    agent = root.parent / "agent.sh"
    agent.write_text(f'#!/bin/sh\nprintf "%s %s\\n" "$REEF_HARNESS_RELEASE" "$PI_CODING_AGENT_DIR" >> {seen}\n')
    agent.chmod(0o755)
    runs = [reefine.wrapper("pi", REEF_HARNESS_BINARY=str(agent)) for _ in range(12)]
    assert all(run.returncode == 0 for run in runs), [run.stderr for run in runs]
    picked = [line.split() for line in seen.read_text().splitlines()]
    kept = sessions(root)
    assert len(picked) == len(kept) == 12
    for (release, agent_dir), session in zip(picked, kept, strict=True):
        chose_canary = in_canary(session["session"], 50)  # the same hash decides again: stable per session
        assert session["canary"] is chose_canary and session["release_id"] == release
        assert release == (canary if chose_canary else served)
        assert agent_dir == str((root / CANARY_DIR if chose_canary else root) / "pi-agent")
    assert {release for release, _dir in picked} == {served, canary}  # 12 sessions at 50%: both ran
    canary_runs = [run for run in runs if "this session runs the canary v2 (50% of sessions)" in run.stderr]
    assert len(canary_runs) == sum(session["canary"] for session in kept)
    doctor = reefine.wrapper("pi", "doctor", REEF_HARNESS_BINARY=str(agent))
    assert "ok canary v2 installed: 50% of new sessions run it" in doctor.stdout
    assert "ok installed files unchanged" in doctor.stdout

    # Ended on the daemon: the next sessions run the served tree, though the install still holds the canary.
    reefine.call("DELETE", f"/reef/scenarios/{SCENARIO}/canary")
    seen.unlink()
    assert all(reefine.wrapper("pi", REEF_HARNESS_BINARY=str(agent)).returncode == 0 for _ in range(4))
    assert {line.split()[0] for line in seen.read_text().splitlines()} == {served}
    doctor = reefine.wrapper("pi", "doctor", REEF_HARNESS_BINARY=str(agent))
    assert "ok the installed canary v2 no longer runs; every session runs the served tree" in doctor.stdout
    assert reefine.wrapper("pi", "update").returncode == 0
    assert not (root / CANARY_DIR).exists() and "canary_release_id" not in (root / INSTALL_SIDECAR).read_text()
