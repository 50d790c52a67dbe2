"""The wrapper's integrity check: a changed installed file stops it (exit 3, naming the file), the agent's own
state does not, and `update` puts the install back. `/bin/true` stands in for the agent here."""

from __future__ import annotations

import json

from tests.support.adapters_testing import Reefine


def test_tampering_stops_the_wrapper_and_the_agents_own_state_does_not(reefine: Reefine) -> None:
    assert reefine.install("pi").returncode == 0
    root = reefine.root()
    agent = {"REEF_HARNESS_BINARY": "/bin/true"}
    assert reefine.wrapper("pi", **agent).returncode == 0

    # What pi itself writes: sessions, and its preference keys in settings.json.
    (root / "pi-agent" / "sessions").mkdir()
    (root / "pi-agent" / "sessions" / "one.jsonl").write_text('{"type": "session"}\n')
    settings_path = root / "pi-agent" / "settings.json"
    settings = json.loads(settings_path.read_text())
    settings_path.write_text(json.dumps({**settings, "theme": "light", "lastChangelogVersion": "9.9.9"}))
    assert reefine.wrapper("pi", **agent).returncode == 0

    extension = root / "pi-agent" / "extensions" / "reef-requests.ts"
    extension.write_text(extension.read_text() + "\n// changed by hand\n")
    settings_path.write_text(json.dumps({**settings, "extensions": ["/somewhere/else.ts"]}))
    refused = reefine.wrapper("pi", **agent)
    assert refused.returncode == 3
    assert "pi-agent/extensions/reef-requests.ts, pi-agent/settings.json" in refused.stderr
    assert "reef-pi update" in refused.stderr

    doctor = reefine.wrapper("pi", "doctor", **agent)
    assert doctor.returncode == 1 and "!! changed: pi-agent/extensions/reef-requests.ts" in doctor.stdout
    assert reefine.wrapper("pi", "update").returncode == 0
    assert reefine.wrapper("pi", **agent).returncode == 0
    assert (root / "pi-agent" / "sessions" / "one.jsonl").exists()


def test_report_needs_a_recorded_session(reefine: Reefine) -> None:
    assert reefine.install("codex").returncode == 0
    assert reefine.wrapper("codex", REEF_HARNESS_BINARY="/bin/true").returncode == 0
    refused = reefine.wrapper("codex", "report", "--score", "1")
    assert refused.returncode == 1 and "no session with recorded model calls" in refused.stderr
    helped = reefine.wrapper("codex", "--help")
    assert helped.returncode == 0 and "report" in helped.stdout and "doctor" in helped.stdout
