"""The embedded model is converted once per machine: every state directory without a `models` folder of its own
uses the user's cache folder, so a second state directory (a profile, the demo) finds the conversion done, and the
cache is keyed by the GGUF's content, so a second checkout (its own virtual environment) finds it done too."""

from __future__ import annotations

import os
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


def test_the_same_gguf_in_two_checkouts_shares_one_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    state = tmp_path / ".reef"
    copies = []
    for checkout in ("one", "two"):
        gguf = tmp_path / checkout / ".venv" / "tiny.gguf"
        gguf.parent.mkdir(parents=True)
        gguf.write_bytes(b"GGUF" + bytes(range(256)) * 64)
        copies.append(gguf)
    os.utime(copies[1], (1_000_000, 1_000_000))  # a clone's file has its own modification time
    first, second = (ModelSource("tiny", gguf).cache_dir(state) for gguf in copies)
    assert first == second

    copies[1].write_bytes(b"GGUF" + bytes(range(256)) * 63 + bytes(256))  # same size, other weights
    assert ModelSource("tiny", copies[1]).cache_dir(state) != first
