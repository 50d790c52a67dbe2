"""The embedded model is converted once per machine: every state directory without a `models` folder of its own
uses the user's cache folder, so a second state directory (a profile, the demo) finds the conversion done."""

from __future__ import annotations

from pathlib import Path

import pytest

from reef_daemon.runtimes.embedded.loading import ModelSource


def test_state_directories_share_the_users_model_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    source = ModelSource("tiny", gguf)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first, second = tmp_path / ".reef", tmp_path / ".reef" / "reefine"
    assert source.cache_dir(first) == source.cache_dir(second)
    assert source.cache_dir(first).parent == tmp_path / "cache" / "reef" / "models"

    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert source.cache_dir(first).parent == tmp_path / "home" / ".cache" / "reef" / "models"

    (second / "models").mkdir(parents=True)  # a state directory with its own (or a linked) models folder keeps it
    assert source.cache_dir(second).parent == second / "models"
