"""Weight versions name the weights: the same weights loaded again (a restart) get the same version, other weights
another; a version number is never given twice to one fingerprint, even across restarts. Checkpoint files on disk
are fingerprinted by their content, whatever their folder."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from reef_daemon.runtimes.embedded import EmbeddedRuntime
from reef_daemon.runtimes.embedded.versions import (
    SAMPLE_BYTES,
    ServingVersion,
    fingerprint,
    fingerprint_files,
    random_incarnation,
)
from reef_daemon.settings import load_settings
from tests.support.embedded_running import RunningReef


def tiny_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))


def test_the_fingerprint_follows_the_weights() -> None:
    assert fingerprint(tiny_model(1)) == fingerprint(tiny_model(1))
    assert fingerprint(tiny_model(1)) != fingerprint(tiny_model(2))
    changed = tiny_model(1)
    with torch.no_grad():
        changed[1].weight[0] += 1e-6
    assert fingerprint(changed) != fingerprint(tiny_model(1))


def test_a_restart_keeps_the_version_and_never_reuses_a_number(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    weights = fingerprint(tiny_model(1))
    first = ServingVersion(weights, ledger)
    assert str(first) == f"{weights}:0"
    assert [first.bump(), first.bump()] == [f"{weights}:1", f"{weights}:2"]
    restarted = ServingVersion(fingerprint(tiny_model(1)), ledger)
    assert str(restarted) == f"{weights}:0"  # the same weights as loaded: the same version
    assert restarted.bump() == f"{weights}:3"  # 1 and 2 named weights of the earlier run


def test_the_embedded_model_loaded_again_has_the_same_version(
    reef: RunningReef, embedded_models: Path, tmp_path: Path
) -> None:
    incarnation, _, _ = reef.runtime.weight_version.rpartition(":")
    (tmp_path / "models").symlink_to(embedded_models, target_is_directory=True)
    settings = load_settings(overrides={"reef.state-dir": str(tmp_path), "reef.port": "0"}, environ={})
    again = EmbeddedRuntime(settings)
    asyncio.run(again.start())
    try:
        assert again.weight_version == f"{incarnation}:0"
    finally:
        asyncio.run(again.close())


def checkpoint(folder: Path, tensors: dict[str, torch.Tensor]) -> Path:
    folder.mkdir(parents=True)
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text("{}")
    return folder


def test_the_files_fingerprint_follows_the_checkpoints_content(tmp_path: Path) -> None:
    torch.manual_seed(0)
    large = torch.randn(4 * SAMPLE_BYTES)  # read in windows, not whole
    tensors = {"a": large, "b": torch.ones(3)}
    first = fingerprint_files(checkpoint(tmp_path / "one", tensors))
    assert fingerprint_files(checkpoint(tmp_path / "elsewhere", tensors)) == first
    others = {
        "trained": {"a": large * 1.001, "b": torch.ones(3)},
        "a small tensor changed": {"a": large, "b": torch.ones(3) * 2},
        "renamed": {"a2": large, "b": torch.ones(3)},
        "another dtype": {"a": large.half(), "b": torch.ones(3)},
    }
    for name, changed in others.items():
        assert fingerprint_files(checkpoint(tmp_path / name, changed)) != first, name


def test_a_folder_without_a_readable_checkpoint_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="no such folder"):
        fingerprint_files(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(OSError, match="no safetensors files"):
        fingerprint_files(tmp_path / "empty")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "model.safetensors").write_bytes(b"\xff" * 16)
    with pytest.raises(ValueError, match="not a safetensors file"):
        fingerprint_files(tmp_path / "broken")


def test_a_random_incarnation_counts_without_a_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    weights = ServingVersion(random_incarnation())
    assert weights.incarnation.startswith("random-") and weights.incarnation != random_incarnation()
    assert [weights.bump(), weights.bump()] == [f"{weights.incarnation}:1", f"{weights.incarnation}:2"]
    assert not any(tmp_path.rglob("*"))
