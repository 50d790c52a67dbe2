"""The versions list marks the release the install script put on this machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reef_client import installed_release
from reef_tui.screens.versions import state_of


def test_installed_release_is_read_from_the_install_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert installed_release("my-harness") is None
    root = tmp_path / "reef-harness" / "my-harness"
    root.mkdir(parents=True)
    (root / ".reef-harness-release").write_text(json.dumps({"release_id": "abc123", "version": "v3"}))
    assert installed_release("my-harness") == "abc123"


def test_state_says_installed_beside_current_or_alone() -> None:
    assert state_of({"current": True, "installed": True}) == "current, installed"
    assert state_of({"restorable": True, "installed": False}) == "restorable"
    assert state_of({"installed": True}) == "installed"
