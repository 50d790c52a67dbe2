"""The versions list marks the release the install script put on this machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reef_client import installed_releases, mark_installed
from reef_tui.screens.versions import state_of


def test_installed_releases_are_read_from_each_adapters_install_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert installed_releases("my-harness") == set()
    folder = tmp_path / "reef-harness" / "my-harness"
    for root, release in ((folder / "pi", "abc123"), (folder / "codex", "def456"), (folder, "0ld")):
        root.mkdir(parents=True, exist_ok=True)
        (root / ".reef-harness-release").write_text(json.dumps({"release_id": release, "version": "v3"}))
    assert installed_releases("my-harness") == {"abc123", "def456", "0ld"}
    marked = mark_installed("my-harness", [{"release_id": "def456"}, {"release_id": "nope"}])  # type: ignore[typeddict-item]
    assert [row["installed"] for row in marked] == [True, False]


def test_state_says_installed_beside_current_or_alone() -> None:
    assert state_of({"current": True, "installed": True}) == "current, installed"
    assert state_of({"restorable": True, "installed": False}) == "restorable"
    assert state_of({"installed": True}) == "installed"
